"""What an edge logs of an answer it serves: the served items in order, each with the score
and propensity of its place in the fill, in the decision record's wire form."""

from __future__ import annotations

import dataclasses

import pytest

from edge.cache.decisions import served
from protocol.audience import Personal
from protocol.decisions import decode_entry
from tests.unit.edge.cache.test_entry import entry


@pytest.mark.parametrize(
    ("picked", "expected"),
    [
        ([0, 1, 2], [(1, 0.9, 0.5), (2, 0.8, 0.25), (3, 0.7, 0.125)]),
        # the caller excluded the fill's second item: the third keeps its own place's figures
        ([0, 2], [(1, 0.9, 0.5), (3, 0.7, 0.125)]),
        # out of the fill's order (not what rendering does, still read right)
        ([2, 0], [(3, 0.7, 0.125), (1, 0.9, 0.5)]),
    ],
)
def test_each_served_item_keeps_its_place_in_the_fill(
    picked: list[int], expected: list[tuple[int, float, float]]
) -> None:
    fill = dataclasses.replace(
        entry(3),
        audience=Personal("u-1"),
        scores=(0.9, 0.8, 0.7),
        propensities=(0.5, 0.25, 0.125),
        context="mobile_evening",
        policy="thompson/4",
        ranking_id="origin-r-0",
    )
    items = [fill.items[k] for k in picked]
    record = served(
        fill, items, request_id="r-1", user_id="u-1", page="home", served_by="edge:eu", at_ms=7
    )()
    assert record.user_id == "u-1"
    [decision] = decode_entry(record.payload)
    assert (decision.request_id, decision.audience, decision.context) == (
        "r-1",
        "user",
        "mobile_evening",
    )
    # Its own request id, and the ranking it served: the origin's answer the fill held.
    assert decision.ranked_as == "origin-r-0"
    assert (decision.policy, decision.policy_version, decision.served_by) == (
        "thompson",
        "4",
        "edge:eu",
    )
    assert [(s.position, s.item_id) for s in decision.shown] == [
        (p, items[p - 1].item_id) for p in range(1, len(items) + 1)
    ]
    assert [(s.score, s.propensity) for s in decision.shown] == [
        (score, propensity) for _, score, propensity in expected
    ]


def test_a_popular_answer_is_deterministic() -> None:
    fill = entry(2)  # no scores or propensities: the popular list
    record = served(
        fill, list(fill.items), request_id="r", user_id="u", page="home", served_by="e", at_ms=1
    )()
    [decision] = decode_entry(record.payload)
    assert decision.audience.startswith("segment:")
    assert decision.policy == "popular"
    assert [s.propensity for s in decision.shown] == [1.0, 1.0]
