"""What a batch of closed joins adds to the learning curve (``join_lessons.curve_point``)."""

from __future__ import annotations

import pytest

from origin.worker.join_lessons import curve_point
from protocol.decisions import Decision, Shown


def decision(*items: str) -> Decision:
    shown = tuple(Shown(item, i + 1, 1.0, 0.5) for i, item in enumerate(items))
    return Decision("r", "u", "a", "c", "home", 0, "origin", "p", "1", "m", shown)


@pytest.mark.parametrize(
    ("closed", "expected"),
    [
        ([], (0, 0)),
        ([(decision("a", "b"), {})], (1, 0)),  # shown, nothing engaged
        ([(decision("a", "b"), {"a": 1.0, "b": 2.0})], (1, 2)),  # both engaged
        ([(decision("a"), {"z": 1.0})], (1, 0)),  # engaged with an item not shown here
        ([(None, {"a": 1.0})], (0, 0)),  # feedback whose decision never came: no slate
        ([(decision("a"), {"a": 1.0}), (decision("b", "c"), {})], (2, 1)),
    ],
)
def test_curve_point(
    closed: list[tuple[Decision | None, dict[str, float]]], expected: tuple[int, int]
) -> None:
    records = [("u", f"r{i}", d, engaged, set[str]()) for i, (d, engaged) in enumerate(closed)]
    assert curve_point(records) == expected
