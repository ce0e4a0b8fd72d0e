from __future__ import annotations

import pytest

from origin.event_streams.streams import StreamEntry
from origin.worker.deferred import DeferredEvents
from protocol.events import FeedbackEvent


def event(user: str, ix: str) -> FeedbackEvent:
    return FeedbackEvent(
        interaction_id=ix,
        user_id=user,
        item_id="it-1",
        action="click",
        timestamp_ms=1,
        accepted_ms=1,
    )


def entry(stream: str, entry_id: bytes) -> StreamEntry:
    return StreamEntry(stream, entry_id, b"raw")


def filled() -> DeferredEvents:
    deferred = DeferredEvents()
    deferred.defer(entry("events:{0}", b"1-0"), event("u-a", "a1"), due=10.0)
    deferred.defer(entry("events:{1}", b"1-0"), event("u-b", "b1"), due=20.0)
    # a later event of a user with something deferred: behind it, due when the first is
    deferred.defer(entry("events:{0}", b"2-0"), event("u-a", "a2"), due=99.0)
    return deferred


def test_what_is_deferred_and_where() -> None:
    deferred = filled()
    assert len(deferred) == 3
    assert "u-a" in deferred
    assert "u-c" not in deferred
    assert deferred.defers(entry("events:{1}", b"1-0"))
    # the same id in another stream is another entry
    assert not deferred.defers(entry("events:{1}", b"2-0"))
    assert deferred.by_stream() == {"events:{0}": [b"1-0", b"2-0"], "events:{1}": [b"1-0"]}


@pytest.mark.parametrize(
    ("now", "everything", "due"),
    [
        (5.0, False, []),
        (10.0, False, ["u-a"]),
        (25.0, False, ["u-a", "u-b"]),
        (0.0, True, ["u-a", "u-b"]),
    ],
    ids=["none-yet", "first", "both", "everything"],
)
def test_users_are_due_by_their_first_deferred_event(
    now: float, everything: bool, due: list[str]
) -> None:
    assert filled().due(now, everything=everything) == due


def test_a_user_is_applied_in_stream_order_and_released_whole() -> None:
    deferred = filled()
    assert [e.interaction_id for _, e in deferred.of(["u-a"])] == ["a1", "a2"]
    deferred.release(["u-a"])
    assert len(deferred) == 1
    assert "u-a" not in deferred
    assert not deferred.defers(entry("events:{0}", b"1-0"))
    assert deferred.by_stream() == {"events:{1}": [b"1-0"]}


@pytest.mark.parametrize(
    ("now", "everything", "limit", "due"),
    [
        (25.0, False, 1, ["u-a"]),
        (25.0, False, 2, ["u-a", "u-b"]),
        (25.0, False, 5, ["u-a", "u-b"]),
        (0.0, True, 1, ["u-a"]),
        (15.0, False, 0, []),
    ],
    ids=["one", "two", "more-than-deferred", "everything-one", "none-asked"],
)
def test_a_limit_takes_the_earliest_due_first(
    now: float, everything: bool, limit: int, due: list[str]
) -> None:
    assert filled().due(now, everything=everything, limit=limit) == due


def test_asking_again_finds_the_same_users_until_they_are_released() -> None:
    deferred = filled()
    assert deferred.due(25.0, limit=1) == ["u-a"]
    # an apply that failed releases nothing: still due, still first
    assert deferred.due(25.0, limit=1) == ["u-a"]
    deferred.release(["u-a"])
    assert deferred.due(25.0) == ["u-b"]


def test_a_user_deferred_again_after_release_is_due_once_by_the_new_mark() -> None:
    deferred = filled()
    deferred.release(["u-a"])
    deferred.defer(entry("events:{0}", b"3-0"), event("u-a", "a3"), due=10.0)
    assert deferred.due(15.0) == ["u-a"]
    assert deferred.due(25.0) == ["u-a", "u-b"]
    assert [e.interaction_id for _, e in deferred.of(["u-a"])] == ["a3"]


def test_due_users_come_in_order_of_due_whatever_the_order_deferred() -> None:
    deferred = DeferredEvents()
    for k, due in enumerate([50.0, 10.0, 30.0, 20.0, 40.0]):
        deferred.defer(entry("events:{0}", f"{k}-0".encode()), event(f"u-{k}", f"x{k}"), due=due)
    assert deferred.due(35.0) == ["u-1", "u-3", "u-2"]
    assert deferred.due(100.0, limit=2) == ["u-1", "u-3"]
