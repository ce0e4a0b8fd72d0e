from __future__ import annotations

import pytest

from protocol.actions import (
    ACTION_WEIGHTS,
    BUYING_ACTIONS,
    ENGAGED_ACTIONS,
    INVALIDATING_ACTIONS,
    MEANINGS,
    reward_of,
)
from protocol.api import Action


def test_every_action_has_a_meaning() -> None:
    assert set(MEANINGS) == set(Action)


def test_action_weights_are_the_seeds() -> None:
    assert ACTION_WEIGHTS == {
        "view": 0.1,
        "click": 0.3,
        "add_to_cart": 0.5,
        "purchase": 1.0,
        "dismiss": -0.2,
    }


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
        ("view", None, 0.1),
        ("click", None, 0.3),
        ("add_to_cart", None, 0.5),
        ("purchase", None, 1.0),
        ("dismiss", None, 0.0),  # a failure, never a negative alpha
        ("unknown", None, 0.0),
        ("click", 0.7, 0.7),
        ("click", 2.5, 1.0),
        ("purchase", -1.0, 0.0),
        ("dismiss", 0.0, 0.0),
    ],
    ids=[
        "view",
        "click",
        "cart",
        "purchase",
        "dismiss-is-zero",
        "unknown-action",
        "override",
        "override-clipped-high",
        "override-clipped-low",
        "override-zero-kept",
    ],
)
def test_reward_of(action: str, override: float | None, expected: float) -> None:
    assert reward_of(action, override) == pytest.approx(expected)
