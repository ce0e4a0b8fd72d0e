"""benchmarks.feedback_load: a burst's events (the background's mix, over users of its own,
mostly casual) and their grouping by partition."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from benchmarks.feedback_load import (
    ACTIONS,
    BURST_EVENTS_PER_USER,
    background_event,
    burst_events,
    burst_users,
    by_partition,
)
from protocol import keys
from protocol.events import FeedbackEvent


@pytest.mark.parametrize(
    ("events", "expected"), [(0, 1), (1, 1), (2, 1), (3, 1), (300_000, 150_000)]
)
def test_burst_users(events: int, expected: int) -> None:
    assert burst_users(events) == expected


def test_burst_events_are_numbered_from_first_and_of_the_burst_users() -> None:
    events = burst_events(np.random.default_rng(1), 40, 5, users=3, items=10, now_ms=7)
    assert [e.interaction_id for e in events] == [f"burst-{n}" for n in range(40, 45)]
    assert {e.user_id for e in events} <= {"burst-0", "burst-1", "burst-2"}
    assert all(e.action in ACTIONS for e in events)
    assert all((e.timestamp_ms, e.accepted_ms) == (7, 7) for e in events)


def test_a_burst_is_mostly_casual_users() -> None:
    """Fewer than 3 interactions that teach (views do not) makes a casual user."""
    count = 60_000
    events = burst_events(
        np.random.default_rng(2), 0, count, users=burst_users(count), items=100, now_ms=0
    )
    teaching = Counter(e.user_id for e in events if e.action != "view")
    casual = burst_users(count) - sum(n >= 3 for n in teaching.values())
    assert casual / burst_users(count) > 0.85
    assert max(teaching.values()) <= 10  # nobody a power user
    assert len(events) / len({e.user_id for e in events}) < BURST_EVENTS_PER_USER + 0.5


@pytest.mark.parametrize("partitions", [1, 3, 8])
def test_by_partition_keeps_each_partitions_order(partitions: int) -> None:
    events = burst_events(np.random.default_rng(3), 0, 200, users=50, items=10, now_ms=0)
    grouped = by_partition(events, partitions)
    assert sorted(e.interaction_id for es in grouped.values() for e in es) == sorted(
        e.interaction_id for e in events
    )
    for partition, appended in grouped.items():
        assert all(keys.partition_of(e.user_id, partitions) == partition for e in appended)
        positions = [events.index(e) for e in appended]
        assert positions == sorted(positions)


def test_the_steady_background_draws_user_item_action_in_that_order() -> None:
    """The steady load's events as before the burst existed: the same draws, ids bg-{n}."""
    rng, again = np.random.default_rng(3), np.random.default_rng(3)
    event = background_event(rng, 12, "bg", users=20_000, items=2_000, now_ms=5)
    user, item, action = again.integers(20_000), again.integers(2_000), again.integers(8)
    assert event == FeedbackEvent(
        "bg-12", f"bg-{user}", f"it-{item:06d}", ACTIONS[int(action)], 5, 5
    )
