from __future__ import annotations

import pytest

from protocol.actions import (
    BUYING_ACTIONS,
    CLICK_GRADE,
    ENGAGED_ACTIONS,
    INVALIDATING_ACTIONS,
    MEANINGS,
    grade_of,
)
from protocol.api import Action


def test_every_action_has_a_meaning() -> None:
    assert set(MEANINGS) == set(Action)


def test_grades_order_what_an_engagement_is_worth() -> None:
    grades = {a.value: m.grade for a, m in MEANINGS.items()}
    assert grades == {
        "view": 0.0,
        "click": CLICK_GRADE,
        "add_to_cart": 0.5,
        "purchase": 1.0,
        "dismiss": 0.0,
    }
    assert 0 < CLICK_GRADE < grades["add_to_cart"] < grades["purchase"]


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        (ENGAGED_ACTIONS, {"click", "add_to_cart", "purchase"}),
        (BUYING_ACTIONS, {"add_to_cart", "purchase"}),
        (INVALIDATING_ACTIONS, {"purchase"}),
    ],
)
def test_derived_sets(actions: frozenset[str], expected: set[str]) -> None:
    assert actions == expected


@pytest.mark.parametrize(
    ("action", "override", "expected"),
    [
        ("view", None, 0.0),
        ("click", None, 0.25),
        ("add_to_cart", None, 0.5),
        ("purchase", None, 1.0),
        ("dismiss", None, 0.0),
        ("unknown", None, 0.0),
        ("click", 0.7, 0.7),
        ("purchase", 0.0, 0.0),
        ("click", 2.5, 1.0),
        ("purchase", -1.0, 0.0),
        ("view", 0.9, 0.0),
        ("dismiss", 0.5, 0.0),
    ],
    ids=[
        "view",
        "click",
        "cart",
        "purchase",
        "dismiss",
        "unknown-action",
        "override",
        "override-zero-kept",
        "override-clipped-high",
        "override-clipped-low",
        "view-never-engages",
        "dismiss-never-engages",
    ],
)
def test_grade_of(action: str, override: float | None, expected: float) -> None:
    assert grade_of(action, override) == pytest.approx(expected)
