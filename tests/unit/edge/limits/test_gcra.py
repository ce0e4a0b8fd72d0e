"""GCRA's arithmetic (``edge.limits.gcra``) as tables, and against the token bucket it replaces
in a PoP store: the same sequences, the same answers."""

from __future__ import annotations

import random

import pytest

from edge.limits.gcra import US, Rate, Taken, take, take_both
from edge.limits.rate_limit import Decision
from resilience.token_bucket import TokenBucket

NOW = 1_767_225_600 * US  # 2026-01-01, in µs: the magnitude Redis's TIME gives


@pytest.mark.parametrize(
    ("rate", "burst", "interval_us", "capacity"),
    [
        (10.0, None, 100_000.0, 10.0),
        (0.5, None, 2_000_000.0, 1.0),  # at least one request, however slow the rate
        (0.5, 10.0, 2_000_000.0, 10.0),  # the fill limit's burst
        (3.0, None, US / 3, 3.0),
        (100_000.0, None, 10.0, 100_000.0),
    ],
)
def test_a_rate_as_interval_and_capacity(
    rate: float, burst: float | None, interval_us: float, capacity: float
) -> None:
    assert Rate.of(rate, burst) == Rate(interval_us, capacity)


@pytest.mark.parametrize(("rate", "burst"), [(0.0, None), (-1.0, None), (1.0, 0.5)])
def test_impossible_rates_are_refused(rate: float, burst: float | None) -> None:
    with pytest.raises(ValueError, match="must be"):
        Rate.of(rate, burst)


# (rate, burst, steps): each step is (µs passed before the request, the µs it must wait;
# 0 means let through).
STEPS = [
    # One second's worth at once, then one every interval.
    (10.0, None, [(0, 0.0)] * 10 + [(0, 100_000.0)]),
    (10.0, None, [(0, 0.0)] * 10 + [(50_000, 50_000.0), (50_000, 0.0), (0, 100_000.0)]),
    # A slow rate still allows one request, then asks for a whole interval.
    (0.5, None, [(0, 0.0), (0, 2e6), (1e6, 1e6), (1e6, 0.0)]),
    # An idle key does not bank more than its burst.
    (2.0, None, [(0, 0.0), (0, 0.0), (100e6, 0.0), (0, 0.0), (0, 500_000.0)]),
    (2.0, 1.0, [(0, 0.0), (0, 500_000.0), (500_000, 0.0)]),
    # The fill limit of the free tier: 10 at once, then one every 2 s.
    (0.5, 10.0, [(0, 0.0)] * 10 + [(0, 2e6), (1e6, 1e6), (1e6, 0.0), (0, 2e6)]),
    # Rates whose interval is not a whole number of µs.
    (3.0, None, [(0, 0.0)] * 3 + [(0, US / 3), (US / 3, 0.0), (0, US / 3)]),
]


@pytest.mark.parametrize(("rate", "burst", "steps"), STEPS)
def test_gcra(rate: float, burst: float | None, steps: list[tuple[float, float]]) -> None:
    limit = Rate.of(rate, burst)
    now, tat = NOW, None
    for n, (passed, wait) in enumerate(steps):
        now += passed
        new, waited = take(tat, now, limit)
        assert waited == pytest.approx(wait, abs=1.0), f"step {n}"  # µs: doubles near 1.8e15
        if waited == 0.0:
            tat = new


@pytest.mark.parametrize(("rate", "burst", "steps"), STEPS)
def test_the_same_answers_as_the_token_bucket(
    rate: float, burst: float | None, steps: list[tuple[float, float]]
) -> None:
    limit = Rate.of(rate, burst)
    bucket = TokenBucket(rate, NOW / US, burst)
    now, tat = NOW, None
    for passed, _ in steps:
        now += passed
        new, waited = take(tat, now, limit)
        assert waited / US == pytest.approx(bucket.take(now / US), abs=1e-6)
        if waited == 0.0:
            tat = new


def test_random_sequences_agree_with_the_token_bucket() -> None:
    rng = random.Random(20)
    for _ in range(200):
        rate = rng.choice([0.5, 1.0, 2.0, 3.0, 10.0, 50.0])
        burst = rng.choice([None, 1.0, 10.0, 30.0])
        limit = Rate.of(rate, burst)
        bucket = TokenBucket(rate, NOW / US, burst)
        now, tat = NOW, None
        for _ in range(50):
            now += rng.choice([0.0, 0.0, rng.uniform(0, 2 * limit.interval_us)])
            new, waited = take(tat, now, limit)
            assert (waited == 0.0) == (bucket.take(now / US) == 0.0)
            if waited == 0.0:
                tat = new


def test_a_refusal_stores_nothing_and_a_wait_of_exactly_the_answer_gets_in() -> None:
    limit = Rate.of(3.0)
    tat = None
    for _ in range(3):
        tat, _ = take(tat, NOW, limit)
    _, wait = take(tat, NOW, limit)
    assert wait > 0
    assert take(tat, NOW + wait, limit)[1] == 0.0


USER = Rate.of(2.0)  # 2/s per user
TOTAL = Rate.of(3.0)  # 3/s per API key


# Requests as (user, time µs since NOW), and which are let through under USER and TOTAL.
@pytest.mark.parametrize(
    ("requests", "allowed"),
    [
        # Two users have their own limits; the key's total (3) refuses the fourth.
        ([("a", 0), ("a", 0), ("b", 0), ("b", 0)], [True, True, True, False]),
        # Over the user's limit while the total has room.
        ([("a", 0), ("a", 0), ("a", 0), ("b", 0)], [True, True, False, True]),
        # A request the user limit refuses takes nothing from the total ...
        ([("a", 0)] * 5 + [("b", 0), ("c", 0)], [True, True, False, False, False, True, False]),
        # ... and one the total refuses takes nothing from the user.
        ([("a", 0), ("b", 0), ("b", 0), ("c", 0), ("c", US / 3)], [True] * 3 + [False, True]),
    ],
)
def test_both_or_neither(requests: list[tuple[str, float]], allowed: list[bool]) -> None:
    users: dict[str, float | None] = {}
    total: float | None = None
    got = []
    for user, at in requests:
        taken = take_both(users.get(user), total, NOW + at, user=USER, total=TOTAL)
        got.append(taken.decision.allowed)
        if taken.decision.allowed:
            users[user], total = taken.user_tat_us, taken.total_tat_us
    assert got == allowed


@pytest.mark.parametrize(
    ("user_tat", "total_tat", "expected"),
    [
        (None, None, Decision(True, 0.0, None)),
        # the user is half a second past their burst, the total has room: the user's wait
        (NOW + US, None, Decision(False, 0.5, "user")),
        # the total needs 1/3 s, the user 0.5 s: both must have room, the later is reported
        (NOW + US, NOW + US, Decision(False, 0.5, "user")),
        (None, NOW + US, Decision(False, 1 / 3, "total")),
        (NOW + 0.75 * US, NOW + 4 * US / 3, Decision(False, 2 / 3, "total")),
    ],
)
def test_a_refusal_reports_the_later_wait(
    user_tat: float | None, total_tat: float | None, expected: Decision
) -> None:
    taken = take_both(user_tat, total_tat, NOW, user=USER, total=TOTAL)
    assert taken.decision.allowed == expected.allowed
    assert taken.decision.scope == expected.scope
    assert taken.decision.retry_after_s == pytest.approx(expected.retry_after_s)
    if not expected.allowed:
        assert taken == Taken(taken.decision)  # nothing to store
