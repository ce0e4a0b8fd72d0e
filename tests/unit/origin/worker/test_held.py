from __future__ import annotations

import pytest

from origin.event_streams.streams import StreamEntry
from origin.worker.held import HeldEvents
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


def filled() -> HeldEvents:
    held = HeldEvents()
    held.hold(entry("events:{0}", b"1-0"), event("u-a", "a1"), due=10.0)
    held.hold(entry("events:{1}", b"1-0"), event("u-b", "b1"), due=20.0)
    # a later event of a user with something held: behind it, due when the first is
    held.hold(entry("events:{0}", b"2-0"), event("u-a", "a2"), due=99.0)
    return held


def test_what_is_held_and_where() -> None:
    held = filled()
    assert len(held) == 3
    assert "u-a" in held
    assert "u-c" not in held
    assert held.holds(entry("events:{1}", b"1-0"))
    # the same id in another stream is another entry
    assert not held.holds(entry("events:{1}", b"2-0"))
    assert held.by_stream() == {"events:{0}": [b"1-0", b"2-0"], "events:{1}": [b"1-0"]}


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
def test_users_are_due_by_their_first_held_event(
    now: float, everything: bool, due: list[str]
) -> None:
    assert filled().due(now, everything=everything) == due


def test_a_user_is_applied_in_stream_order_and_released_whole() -> None:
    held = filled()
    assert [e.interaction_id for _, e in held.of(["u-a"])] == ["a1", "a2"]
    held.release(["u-a"])
    assert len(held) == 1
    assert "u-a" not in held
    assert not held.holds(entry("events:{0}", b"1-0"))
    assert held.by_stream() == {"events:{1}": [b"1-0"]}


@pytest.mark.parametrize(
    ("now", "everything", "limit", "due"),
    [
        (25.0, False, 1, ["u-a"]),
        (25.0, False, 2, ["u-a", "u-b"]),
        (25.0, False, 5, ["u-a", "u-b"]),
        (0.0, True, 1, ["u-a"]),
        (15.0, False, 0, []),
    ],
    ids=["one", "two", "more-than-held", "everything-one", "none-asked"],
)
def test_a_limit_takes_the_earliest_due_first(
    now: float, everything: bool, limit: int, due: list[str]
) -> None:
    assert filled().due(now, everything=everything, limit=limit) == due


def test_asking_again_finds_the_same_users_until_they_are_released() -> None:
    held = filled()
    assert held.due(25.0, limit=1) == ["u-a"]
    # an apply that failed releases nothing: still due, still first
    assert held.due(25.0, limit=1) == ["u-a"]
    held.release(["u-a"])
    assert held.due(25.0) == ["u-b"]


def test_a_user_held_again_after_release_is_due_once_by_the_new_mark() -> None:
    held = filled()
    held.release(["u-a"])
    held.hold(entry("events:{0}", b"3-0"), event("u-a", "a3"), due=10.0)
    assert held.due(15.0) == ["u-a"]
    assert held.due(25.0) == ["u-a", "u-b"]
    assert [e.interaction_id for _, e in held.of(["u-a"])] == ["a3"]


def test_due_users_come_in_order_of_due_whatever_the_order_held() -> None:
    held = HeldEvents()
    for k, due in enumerate([50.0, 10.0, 30.0, 20.0, 40.0]):
        held.hold(entry("events:{0}", f"{k}-0".encode()), event(f"u-{k}", f"x{k}"), due=due)
    assert held.due(35.0) == ["u-1", "u-3", "u-2"]
    assert held.due(100.0, limit=2) == ["u-1", "u-3"]
