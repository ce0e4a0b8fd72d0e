"""What ``benchmarks.hit_ratio``'s short mode tells a real origin before the replay, and how
it compares the real stack with the simulation."""

from __future__ import annotations

import pytest

from benchmarks.hit_ratio_live import feedback_bodies, history_of, points
from benchmarks.traffic_model import HISTORY_S, INTERACTION, REQUEST, Event
from protocol.api import MAX_FEEDBACK_ITEMS, FeedbackRequest

WARMUP_S = 120.0
START = -WARMUP_S


@pytest.mark.parametrize(
    ("event", "told"),
    [
        ((START - 10.0, INTERACTION, 0, 5), True),  # just before the replay
        ((START - HISTORY_S, INTERACTION, 0, 5), True),  # two days before it
        ((START, INTERACTION, 0, 5), False),  # the replay's own
        ((START - 10.0, REQUEST, 0, -1), False),  # page views are replayed, not told
    ],
)
def test_the_history_is_every_interaction_before_the_replay(event: Event, told: bool) -> None:
    history = history_of([event], WARMUP_S)
    assert (history == {0: [(event[0], event[3])]}) is told
    assert told or history == {}


def test_history_bodies_are_valid_feedback_at_their_times() -> None:
    interactions = [(float(-1000 - k), k + 1) for k in range(MAX_FEEDBACK_ITEMS + 3)]
    start = 1_800_000_000.0
    bodies = [
        FeedbackRequest.model_validate(body, context={"now": start})
        for body in feedback_bodies("u-1", interactions, lambda t: start + t)
    ]
    assert [len(b.feedback) for b in bodies] == [MAX_FEEDBACK_ITEMS, 3]
    first = bodies[0].feedback[0]
    assert first.item_id == "it-000000"  # rank 1: the catalog's first item
    assert first.timestamp is not None
    assert first.timestamp.timestamp() == start - 1000


@pytest.mark.parametrize(
    ("live", "simulated", "expected"),
    [(0.95, 0.97, -2.0), (0.9812, 0.97, 1.12), (None, 0.9, None), (0.9, None, None)],
)
def test_points(live: float | None, simulated: float | None, expected: float | None) -> None:
    assert points(live, simulated) == expected
