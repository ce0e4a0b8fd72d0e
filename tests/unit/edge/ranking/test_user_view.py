from __future__ import annotations

from edge.ranking.user_view import UserViews
from protocol.segments import Segment
from tests.fakes import FakeClock


def views(clock: FakeClock, max_users: int = 100) -> UserViews:
    return UserViews(max_users=max_users, clock=clock)


def test_unknown_user_is_new() -> None:
    snapshot = views(FakeClock()).snapshot("u")
    assert snapshot.segment is Segment.NEW
    assert snapshot.recent_items == ()
    assert snapshot.since_interaction_s is None


def test_segment_follows_interactions_in_the_last_day() -> None:
    clock = FakeClock()
    v = views(clock)
    v.record("u", ["a"])
    assert v.snapshot("u").segment is Segment.CASUAL
    v.record("u", ["b", "c"])
    assert v.snapshot("u").segment is Segment.ACTIVE
    v.record("u", [f"i{n}" for n in range(8)])
    assert v.snapshot("u").segment is Segment.POWER
    clock.tick(86_400)  # a day later none of them count, but the user is known
    assert v.snapshot("u").segment is Segment.CASUAL


def test_time_since_the_last_interaction() -> None:
    clock = FakeClock()
    v = views(clock)
    v.record("u", ["a"])
    assert v.snapshot("u").since_interaction_s == 0
    clock.tick(90)
    v.record("u", ["b"])
    clock.tick(30)
    assert v.snapshot("u").since_interaction_s == 30


def test_recent_items_are_in_interaction_order() -> None:
    v = views(FakeClock())
    v.record("u", ["a", "b"])
    v.record("u", ["c"])
    assert v.snapshot("u").recent_items == ("a", "b", "c")


def test_least_recently_seen_users_are_forgotten_first() -> None:
    v = views(FakeClock(), max_users=2)
    v.record("a", ["x"])
    v.record("b", ["x"])
    v.record("a", ["y"])  # a is now the most recent
    v.record("c", ["x"])
    assert len(v) == 2
    assert v.snapshot("b").segment is Segment.NEW
    assert v.snapshot("a").segment is Segment.CASUAL


def test_an_interaction_counts_from_when_it_happened() -> None:
    """A client that buffered its events sends them late: each counts from its own time,
    never from the future, and the newest are kept in time order."""
    clock = FakeClock()
    clock.tick(10 * 86_400)
    now = clock()
    v = views(clock)
    v.record("u", ["old"], [now - 2 * 86_400])  # two days ago: known, not active today
    assert v.snapshot("u").segment is Segment.CASUAL
    assert v.snapshot("u").since_interaction_s == 2 * 86_400
    v.record("u", ["b", "a"], [now - 60, now - 120])
    v.record("u", ["ahead"], [now + 3_600])  # a clock ahead counts as now
    snapshot = v.snapshot("u")
    assert snapshot.recent_items == ("old", "a", "b", "ahead")
    assert snapshot.since_interaction_s == 0
    assert snapshot.segment is Segment.ACTIVE  # three today


def test_interactions_without_a_time_count_from_now_in_their_order() -> None:
    clock = FakeClock()
    v = views(clock)
    v.record("u", ["c", "a", "b"], [None, None])
    assert v.snapshot("u").recent_items == ("c", "a", "b")
