from __future__ import annotations

import math
from dataclasses import replace

import pytest

from origin.llm.model import Decision, TriggerInput
from origin.llm.triggers import (
    CONSIDERATION_PAGES,
    bandit_uncertainty,
    evaluate,
    is_simple,
)
from protocol.api import PageType

# Nothing asks for the model: a warm user, a confident pick, a home page, time to spare.
QUIET = TriggerInput(
    explanation_requested=False,
    interaction_count=50,
    bandit_uncertainty=0.1,
    page_type="home",
    cross_domain=False,
    budget_remaining_ms=500.0,
    rate_limited=False,
    cache_hit=False,
    simple_recommendation=False,
)
# Every invoke rule fires.
EAGER = replace(
    QUIET,
    explanation_requested=True,
    interaction_count=0,
    bandit_uncertainty=0.9,
    page_type="item_detail",
    cross_domain=True,
)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, Decision(False, "not_needed")),
        # invoke rules, each alone
        ({"explanation_requested": True}, Decision(True, "requested")),
        ({"interaction_count": 9}, Decision(True, "cold_start")),
        ({"interaction_count": 10}, Decision(False, "not_needed")),
        ({"interaction_count": 0}, Decision(True, "cold_start")),
        ({"bandit_uncertainty": 0.41}, Decision(True, "uncertain")),
        ({"bandit_uncertainty": 0.4}, Decision(False, "not_needed")),
        ({"page_type": "item_detail"}, Decision(True, "consideration")),
        ({"page_type": "consideration"}, Decision(True, "consideration")),
        ({"page_type": "search"}, Decision(False, "not_needed")),
        ({"page_type": "category"}, Decision(False, "not_needed")),
        ({"page_type": None}, Decision(False, "not_needed")),
        ({"cross_domain": True}, Decision(True, "cross_domain")),
        # invoke rules in the seed's order
        (
            {"interaction_count": 3, "bandit_uncertainty": 0.9, "cross_domain": True},
            Decision(True, "cold_start"),
        ),
        ({"bandit_uncertainty": 0.9, "page_type": "item_detail"}, Decision(True, "uncertain")),
        ({"page_type": "item_detail", "cross_domain": True}, Decision(True, "consideration")),
        # skip rules alone (nothing wanted the model anyway)
        ({"budget_remaining_ms": 99.9}, Decision(False, "budget")),
        ({"budget_remaining_ms": 100.0}, Decision(False, "not_needed")),
        ({"rate_limited": True}, Decision(False, "rate_limited")),
        ({"cache_hit": True}, Decision(False, "cached")),
        ({"simple_recommendation": True}, Decision(False, "simple")),
    ],
)
def test_rules_alone(changes: dict[str, object], expected: Decision) -> None:
    assert evaluate(replace(QUIET, **changes)) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, Decision(True, "requested")),
        ({"explanation_requested": False}, Decision(True, "cold_start")),
        # skip rules win over every invoke rule, in the seed's order
        ({"simple_recommendation": True}, Decision(False, "simple")),
        ({"cache_hit": True, "simple_recommendation": True}, Decision(False, "cached")),
        (
            {"rate_limited": True, "cache_hit": True, "simple_recommendation": True},
            Decision(False, "rate_limited"),
        ),
        (
            {
                "budget_remaining_ms": 0.0,
                "rate_limited": True,
                "cache_hit": True,
                "simple_recommendation": True,
            },
            Decision(False, "budget"),
        ),
        ({"budget_remaining_ms": -5.0}, Decision(False, "budget")),
        ({"budget_remaining_ms": 100.0}, Decision(True, "requested")),
    ],
)
def test_skip_rules_before_invoke_rules(changes: dict[str, object], expected: Decision) -> None:
    assert evaluate(replace(EAGER, **changes)) == expected  # type: ignore[arg-type]


def test_consideration_pages_are_page_types_or_the_seeds_word() -> None:
    known = {p.value for p in PageType}
    assert CONSIDERATION_PAGES - known == {"consideration"}
    assert PageType.ITEM_DETAIL.value in CONSIDERATION_PAGES


@pytest.mark.parametrize(
    ("alpha", "beta", "expected"),
    [
        (1.0, 1.0, 1 / math.sqrt(2)),  # the uniform prior: uncertain
        (2.0, 2.0, 0.5),
        (3.0, 3.25, 0.4),  # exactly the threshold: not above it
        (50.0, 50.0, 0.1),
        (0.5, 0.5, 1.0),  # one pseudo-observation or less: clipped to 1
        (0.0, 0.0, 1.0),
        (-3.0, 1.0, 1.0),
        (math.nan, 1.0, 1.0),
        (math.inf, 1.0, 0.0),
    ],
)
def test_bandit_uncertainty(alpha: float, beta: float, expected: float) -> None:
    u = bandit_uncertainty(alpha, beta)
    assert u == pytest.approx(expected)
    assert 0.0 <= u <= 1.0


@pytest.mark.parametrize(
    ("source", "simple"),
    [
        ("trending", True),
        ("collaborative", False),
        ("content", False),
        ("exploration", False),
        ("fresh", False),
        ("", False),
    ],
)
def test_is_simple(source: str, simple: bool) -> None:
    assert is_simple(source) is simple
