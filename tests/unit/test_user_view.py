from __future__ import annotations

from edge.user_view import UserViews
from protocol.segments import Segment
from tests.fakes import FakeClock


def views(clock: FakeClock, **kw: float) -> UserViews:
    return UserViews(
        max_users=int(kw.get("max_users", 100)),
        session_idle_s=kw.get("session_idle_s", 1800),
        clock=clock,
    )


def test_unknown_user_is_new() -> None:
    snapshot = views(FakeClock()).snapshot("u")
    assert snapshot.segment is Segment.NEW
    assert snapshot.recent_items == ()
    assert snapshot.session_active is False


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


def test_session_is_active_until_idle() -> None:
    clock = FakeClock()
    v = views(clock, session_idle_s=1800)
    v.record("u", ["a"])
    assert v.snapshot("u").session_active
    clock.tick(1799)
    assert v.snapshot("u").session_active
    clock.tick(1)
    assert not v.snapshot("u").session_active


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
