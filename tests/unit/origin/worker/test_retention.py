"""The logs' retention rules (``origin.worker.retention``): the retention point, the safety
floor, and what a trim may remove under it."""

from __future__ import annotations

import pytest

from decision_log.writer import Retention
from origin.worker.retention import (
    StreamFacts,
    TrimPlan,
    floor_of,
    plan,
    retention_point,
)

DAY_MS = 86_400_000
NOW_MS = 100 * DAY_MS
WEEK = Retention(7 * 86_400.0, 1000)
AGE = (NOW_MS - 7 * DAY_MS, 0)  # WEEK's retention point at NOW_MS


@pytest.mark.parametrize(
    ("now_ms", "seconds", "point"),
    [
        (NOW_MS, 7 * 86_400.0, (NOW_MS - 7 * DAY_MS, 0)),
        (NOW_MS, 60.0, (NOW_MS - 60_000, 0)),
        (NOW_MS, 0.5, (NOW_MS - 500, 0)),
        (1000, 3600.0, (0, 0)),  # younger than the retention: keep everything
    ],
)
def test_the_retention_point_is_the_oldest_id_the_age_keeps(
    now_ms: int, seconds: float, point: tuple[int, int]
) -> None:
    assert retention_point(now_ms, seconds) == point


@pytest.mark.parametrize(
    ("groups", "floor"),
    [
        ([], None),  # no group reads the stream: no floor
        ([(b"10-0", None)], (10, 1)),  # all acknowledged: what follows the last delivered
        ([(b"10-0", b"4-1")], (4, 1)),  # the oldest pending
        ([(b"10-0", None), ("7-3", "8-0")], (7, 3)),  # the group furthest behind
        ([(b"0-0", None)], (0, 1)),  # a group that has read nothing needs everything
    ],
    ids=["no-group", "caught-up", "pending", "two-groups", "unread"],
)
def test_the_floor_is_the_oldest_entry_any_group_still_needs(
    groups: list[tuple[bytes | str, bytes | str | None]], floor: tuple[int, int] | None
) -> None:
    assert floor_of(groups) == floor


def days_ago(days: float) -> tuple[int, int]:
    return NOW_MS - int(days * DAY_MS), 0


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        # No group reads it (contexts, rewards, shadow): age and size, nothing spared.
        (StreamFacts(5000, None), TrimPlan(AGE, 1000, spared=False)),
        # Caught up: nothing is needed, the retention rules.
        (StreamFacts(500, days_ago(0)), TrimPlan(AGE, None, spared=False)),
        # Over the cap with a short backlog: the cap applies too.
        (StreamFacts(5000, days_ago(0), days_ago(0), 1), TrimPlan(AGE, 1000, False)),
        # Caught up long ago, nothing appended since: everything older than a week goes.
        (StreamFacts(500, days_ago(9)), TrimPlan(AGE, None, spared=False)),
        # Workers down for nine days: the floor is older than the retention point, so
        # nothing from it on goes; spared.
        (StreamFacts(500, days_ago(9), days_ago(9)), TrimPlan(days_ago(9), None, True)),
        # A group that has read nothing yet keeps everything.
        (StreamFacts(500, (0, 1), days_ago(10)), TrimPlan(days_ago(10), None, spared=True)),
        # A backlog longer than the cap: the cap would reach entries not yet applied, so
        # the size trim stops at the floor.
        (
            StreamFacts(5000, days_ago(1), days_ago(1), backlog=2000),
            TrimPlan(days_ago(1), None, spared=True),
        ),
        # A backlog not counted to its end (longer than the probe): the size trim waits
        # (down to the floor it might remove what the cap keeps).
        (StreamFacts(5000, days_ago(1), days_ago(1)), TrimPlan(AGE, None, spared=True)),
        # A backlog exactly the cap fits.
        (
            StreamFacts(5000, days_ago(1), days_ago(1), backlog=1000),
            TrimPlan(AGE, 1000, spared=False),
        ),
        # Pending since nine days, but the next entry a group needs is two days old (the
        # floor's own entry is gone): nothing older than the retention is spared.
        (StreamFacts(500, days_ago(9), days_ago(2)), TrimPlan(AGE, None, spared=False)),
        # An empty stream.
        (StreamFacts(0, (0, 1)), TrimPlan(AGE, None, spared=False)),
        # A backlog counted to one past the cap: known to be longer than it.
        (
            StreamFacts(5000, days_ago(3), days_ago(3), backlog=1001),
            TrimPlan(days_ago(3), None, spared=True),
        ),
    ],
    ids=[
        "no-group",
        "caught-up",
        "caught-up-over-cap",
        "idle-since-caught-up",
        "backlog-older-than-retention",
        "never-read",
        "backlog-over-cap",
        "backlog-uncounted",
        "backlog-at-cap",
        "floor-entry-gone",
        "empty",
        "backlog-counted-past-cap",
    ],
)
def test_a_trim_goes_to_the_older_of_the_retention_and_the_floor(
    facts: StreamFacts, expected: TrimPlan
) -> None:
    assert plan(facts, WEEK, NOW_MS) == expected


def test_a_trim_never_reaches_the_floor() -> None:
    """Whatever the retention, the plan's MINID is at or below the floor, and a size trim
    is planned only when the whole backlog fits in it."""
    for seconds in (60.0, 3600.0, 7 * 86_400.0):
        for entries in (1000, 10_000):
            for floor_days in (0.0, 0.5, 3.0, 30.0):
                for backlog in (None, 1, 999, 1000, 1001, 20_000):
                    floor = days_ago(floor_days)
                    facts = StreamFacts(50_000, floor, floor, backlog)
                    p = plan(facts, Retention(seconds, entries), NOW_MS)
                    assert p.min_id <= floor
                    if p.max_len is not None:
                        assert backlog is not None
                        assert backlog <= p.max_len
