"""benchmarks.freshness_overload: how far behind the worker is from a reading of the
streams, when the burst counts as drained, the readings in a window, the arms' ratio."""

from __future__ import annotations

import pytest

from benchmarks.freshness_overload import (
    Reading,
    age_s,
    behind_during,
    censored_figures,
    drained,
    first,
    longest_stall_s,
    oldest,
    ratio,
    ratio_kind,
    read_through,
    reading_before,
    stream_ms,
)


def reading(
    at: float,
    *,
    now_ms: int = 100_000,
    undelivered_ms: int | None = None,
    unacked_ms: int | None = None,
    pending: int = 0,
) -> Reading:
    return Reading(at, now_ms, undelivered_ms, unacked_ms, pending)


@pytest.mark.parametrize(
    ("entry_id", "expected"),
    [(b"1700000000123-0", 1700000000123), ("1700000000123-17", 1700000000123), ("5-0", 5)],
)
def test_stream_ms(entry_id: bytes | str, expected: int) -> None:
    assert stream_ms(entry_id) == expected


@pytest.mark.parametrize(
    ("now_ms", "entry_ms", "expected"),
    [
        (100_000, None, 0.0),  # nothing unread: not behind
        (100_000, 90_000, 10.0),
        (100_000, 99_999, 0.001),
        (100_000, 100_500, 0.0),  # an id a little ahead of the clock read: not negative
    ],
)
def test_age_s(now_ms: int, entry_ms: int | None, expected: float) -> None:
    assert age_s(now_ms, entry_ms) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("times", "expected"),
    [((), None), ((None, None), None), ((5, None, 3), 3), ((None, 7), 7)],
)
def test_oldest(times: tuple[int | None, ...], expected: int | None) -> None:
    assert oldest(*times) == expected


@pytest.mark.parametrize(
    ("undelivered_ms", "unacked_ms", "behind_s", "unacked_s"),
    [
        (None, None, 0.0, 0.0),
        (88_000, 88_000, 12.0, 12.0),
        # held entries older than what the worker reads: applied late, not behind
        (99_000, 40_000, 1.0, 60.0),
    ],
)
def test_reading_behind_and_unapplied(
    undelivered_ms: int | None, unacked_ms: int | None, behind_s: float, unacked_s: float
) -> None:
    r = reading(0.0, undelivered_ms=undelivered_ms, unacked_ms=unacked_ms)
    assert (r.behind_s, r.unacked_s) == pytest.approx((behind_s, unacked_s))


@pytest.mark.parametrize(
    ("unacked_ms", "expected"),
    [
        (None, True),  # nothing left at all
        (50_001, True),  # only entries appended after the burst
        (50_000, False),  # the burst's last millisecond
        (10_000, False),
    ],
)
def test_drained(unacked_ms: int | None, expected: bool) -> None:
    assert drained(reading(1.0, unacked_ms=unacked_ms), burst_end_ms=50_000) is expected


@pytest.mark.parametrize(
    ("at", "expected"),
    [(0.5, None), (1.0, 1.0), (1.7, 1.5), (9.0, 2.0)],
)
def test_reading_before(at: float, expected: float | None) -> None:
    readings = [reading(t) for t in (1.0, 1.5, 2.0)]
    found = reading_before(readings, at)
    assert (found.at if found is not None else None) == expected


def test_behind_during_takes_the_window_only() -> None:
    readings = [
        reading(0.0, undelivered_ms=99_000, pending=5),  # before the window
        reading(1.0, undelivered_ms=88_000, unacked_ms=70_000, pending=300),
        reading(1.5, undelivered_ms=85_000, unacked_ms=70_000, pending=200),
        reading(2.0, undelivered_ms=95_000, unacked_ms=95_000, pending=100),
        reading(9.0, undelivered_ms=50_000, pending=9_000),  # after it
    ]
    assert behind_during(readings, 1.0, 2.0, bound_s=10.0) == {
        "readings": 3,
        "min_s": 5.0,
        "p50_s": 12.0,
        "max_s": 15.0,
        "share_at_least_bound": 0.667,
        "unapplied_max_s": 30.0,
        "pending_max": 300,
    }


def test_behind_during_an_empty_window() -> None:
    assert behind_during([reading(0.0)], 1.0, 2.0, bound_s=10.0) is None


@pytest.mark.parametrize(
    ("numerator", "denominator", "expected"),
    [
        (50.0, 100.0, 0.5),
        (300.0, 200.0, 1.5),
        (None, 100.0, None),
        (50.0, None, None),
        (1.0, 0.0, None),
    ],
)
def test_ratio(numerator: float | None, denominator: float | None, expected: float | None) -> None:
    assert ratio(numerator, denominator) == expected


@pytest.mark.parametrize(
    ("samples", "timed_out", "expected"),
    [
        ([], 0, None),
        ([100.0, 200.0, 300.0], 0, {"p50_ms": 200.0, "p95_ms": 300.0, "p99_ms": 300.0}),
        # a probe that timed out is at least the timeout: it is the p99 here
        ([100.0, 200.0, 300.0], 1, {"p50_ms": 300.0, "p95_ms": 900.0, "p99_ms": 900.0}),
        ([], 2, {"p50_ms": 900.0, "p95_ms": 900.0, "p99_ms": 900.0}),
    ],
)
def test_censored_figures(
    samples: list[float], timed_out: int, expected: dict[str, float] | None
) -> None:
    found = censored_figures(samples, timed_out, timeout_ms=900.0)
    if expected is None:
        assert found is None
    else:
        assert found is not None
        assert {k: found[k] for k in expected} == expected


@pytest.mark.parametrize(
    ("numerator", "denominator", "expected"),
    [
        (500.0, 800.0, "exact"),
        (900.0, 800.0, "lower bound"),  # the tiers' p99 at the timeout: at least this
        (500.0, 900.0, "upper bound"),
        (900.0, 900.0, "unknown"),
        (None, 800.0, "unknown"),
    ],
)
def test_ratio_kind(numerator: float | None, denominator: float | None, expected: str) -> None:
    assert ratio_kind(numerator, denominator, timeout_ms=900.0) == expected


@pytest.mark.parametrize(
    ("undelivered_ms", "unacked_ms", "read", "done"),
    [
        (None, None, True, True),
        (None, 40_000, True, False),  # read through, the burst's entries held
        (50_001, 50_001, True, True),
        (50_000, 50_000, False, False),
    ],
)
def test_read_through_and_drained(
    undelivered_ms: int | None, unacked_ms: int | None, read: bool, done: bool
) -> None:
    r = reading(1.0, undelivered_ms=undelivered_ms, unacked_ms=unacked_ms)
    assert (read_through(r, 50_000), drained(r, 50_000)) == (read, done)


@pytest.mark.parametrize(
    ("since", "expected"),
    [(0.0, 1.0), (1.2, 2.0), (2.1, None)],
)
def test_first_wanted_reading_from_since(since: float, expected: float | None) -> None:
    readings = [reading(t, pending=n) for t, n in ((0.5, 0), (1.0, 7), (2.0, 9))]
    found = first(readings, since, lambda r: r.pending > 0)
    assert (found.at if found is not None else None) == expected


@pytest.mark.parametrize(
    ("unread", "expected"),
    [
        ([], 0.0),
        ([None, None, None], 0.0),  # nothing to read: not a stall
        ([100, 200, 300], 0.0),  # reading on
        ([100, 100, 100, 200], 2.0),
        ([100, 100, 200, 200, 200, 200, 300], 3.0),  # the longest run
    ],
)
def test_longest_stall_s(unread: list[int | None], expected: float) -> None:
    readings = [reading(float(k), undelivered_ms=ms) for k, ms in enumerate(unread)]
    assert longest_stall_s(readings) == expected
