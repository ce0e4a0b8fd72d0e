"""The edge's rate limiter, as tables at the tiers' boundaries."""

from __future__ import annotations

import pytest

from edge.limits.rate_limit import Decision, RateLimiter
from protocol.tiers import ENDPOINTS, LIMITS, Tier, TierLimit
from tests.fakes import FakeClock

# Small limits for the limiter's own behaviour: 2/s per user, 3/s per API key.
SMALL = {Tier.FREE: {"personalize": TierLimit(per_user_rps=2, total_rps=3)}}


@pytest.mark.parametrize(
    ("tier", "endpoint", "per_user", "total"),
    [
        (Tier.PREMIUM, "personalize", 1_000, 100_000),
        (Tier.PREMIUM, "feedback", 5_000, 500_000),
        (Tier.PREMIUM, "explain", 100, 10_000),
        (Tier.STANDARD, "personalize", 100, 50_000),
        (Tier.STANDARD, "feedback", 500, 100_000),
        (Tier.STANDARD, "explain", 10, 5_000),
        (Tier.FREE, "personalize", 10, 10_000),
        (Tier.FREE, "feedback", 50, 20_000),
        (Tier.FREE, "explain", 1, 1_000),
    ],
)
def test_the_seeds_limits(tier: Tier, endpoint: str, per_user: float, total: float) -> None:
    assert LIMITS[tier][endpoint] == TierLimit(per_user_rps=per_user, total_rps=total)


def test_every_tier_limits_every_endpoint() -> None:
    assert {tier: sorted(LIMITS[tier]) for tier in Tier} == {t: sorted(ENDPOINTS) for t in Tier}


@pytest.mark.parametrize(("tier", "burst"), [(Tier.FREE, 10), (Tier.STANDARD, 100)])
def test_a_user_gets_one_seconds_worth_at_once(tier: Tier, burst: int) -> None:
    limiter = RateLimiter(FakeClock())
    decisions = [limiter.check(tier, "personalize", "u", "k") for _ in range(burst + 1)]
    assert all(d.allowed for d in decisions[:burst])
    refused = decisions[burst]
    assert (refused.allowed, refused.scope) == (False, "user")
    assert refused.retry_after_s == pytest.approx(1 / burst)


def test_free_personalize_refills_after_time_passes() -> None:
    clock = FakeClock(0.0)
    limiter = RateLimiter(clock)
    for _ in range(10):
        assert limiter.check(Tier.FREE, "personalize", "u", "k").allowed
    assert not limiter.check(Tier.FREE, "personalize", "u", "k").allowed
    clock.tick(0.1)
    assert limiter.check(Tier.FREE, "personalize", "u", "k").allowed
    assert not limiter.check(Tier.FREE, "personalize", "u", "k").allowed
    clock.tick(1.0)
    assert sum(limiter.check(Tier.FREE, "personalize", "u", "k").allowed for _ in range(20)) == 10


def test_free_explain_allows_one_a_second() -> None:
    clock = FakeClock(0.0)
    limiter = RateLimiter(clock)
    assert limiter.check(Tier.FREE, "explain", "u", "k").allowed
    assert limiter.check(Tier.FREE, "explain", "u", "k") == Decision(False, 1.0, "user")
    clock.tick(1.0)
    assert limiter.check(Tier.FREE, "explain", "u", "k").allowed


# Requests as (user, API key) under SMALL, and which of them are let through.
@pytest.mark.parametrize(
    ("requests", "allowed"),
    [
        # Two users have their own buckets; the key's total (3) refuses the fourth.
        ([("a", "k"), ("a", "k"), ("b", "k"), ("b", "k")], [True, True, True, False]),
        # Over the user's limit (2) while the total still has room.
        ([("a", "k"), ("a", "k"), ("a", "k"), ("b", "k")], [True, True, False, True]),
        # A request the user limit refuses takes nothing from the total ...
        (
            [("a", "k")] * 5 + [("b", "k"), ("c", "k")],
            [True, True, False, False, False, True, False],
        ),
        # API keys have their own totals, and the same user id under two keys is two users.
        (
            [("a", "k"), ("a", "k"), ("a", "j"), ("a", "j"), ("a", "j")],
            [True, True, True, True, False],
        ),
    ],
)
def test_user_and_total_buckets(requests: list[tuple[str, str]], allowed: list[bool]) -> None:
    limiter = RateLimiter(FakeClock(), limits=SMALL)
    got = [limiter.check(Tier.FREE, "personalize", user, key).allowed for user, key in requests]
    assert got == allowed


def test_a_request_refused_by_the_total_leaves_the_users_bucket_full() -> None:
    clock = FakeClock(0.0)
    limiter = RateLimiter(clock, limits=SMALL)
    for user in ("a", "a", "b"):
        assert limiter.check(Tier.FREE, "personalize", user, "k").allowed
    refused = [limiter.check(Tier.FREE, "personalize", "c", "k") for _ in range(5)]
    assert (refused[-1].allowed, refused[-1].scope) == (False, "total")
    assert refused[-1].retry_after_s == pytest.approx(1 / 3)
    clock.tick(2 / 3)  # two tokens back in the total
    assert [limiter.check(Tier.FREE, "personalize", "c", "k").allowed for _ in range(3)] == [
        True,
        True,
        False,
    ]


def test_the_later_of_two_refusals_is_reported() -> None:
    limits = {Tier.FREE: {"personalize": TierLimit(per_user_rps=1, total_rps=2)}}
    clock = FakeClock(0.0)
    limiter = RateLimiter(clock, limits=limits)
    assert limiter.check(Tier.FREE, "personalize", "a", "k").allowed
    assert limiter.check(Tier.FREE, "personalize", "b", "k").allowed
    # a: user bucket needs 1 s, the total 0.5 s: only after 1 s can both give a token.
    assert limiter.check(Tier.FREE, "personalize", "a", "k") == Decision(False, 1.0, "user")
    clock.tick(0.5)
    # c: a full user bucket, the total has a token again.
    assert limiter.check(Tier.FREE, "personalize", "c", "k").allowed
    assert limiter.check(Tier.FREE, "personalize", "d", "k") == Decision(False, 0.5, "total")


def test_users_are_bounded_and_a_forgotten_user_starts_full() -> None:
    limits = {Tier.FREE: {"personalize": TierLimit(per_user_rps=1, total_rps=1_000)}}
    limiter = RateLimiter(FakeClock(), max_users=3, limits=limits)
    for user in ("a", "b", "c"):
        assert limiter.check(Tier.FREE, "personalize", user, "k").allowed
    assert not limiter.check(Tier.FREE, "personalize", "a", "k").allowed  # a: recently used
    assert limiter.check(Tier.FREE, "personalize", "d", "k").allowed  # evicts b, the oldest
    assert limiter.users_tracked == 3
    assert not limiter.check(Tier.FREE, "personalize", "a", "k").allowed  # a was kept
    assert limiter.check(Tier.FREE, "personalize", "b", "k").allowed  # b forgotten: full again
    assert limiter.users_tracked == 3


def test_endpoints_have_separate_buckets() -> None:
    limiter = RateLimiter(FakeClock())
    assert limiter.check(Tier.FREE, "explain", "u", "k").allowed
    assert not limiter.check(Tier.FREE, "explain", "u", "k").allowed
    assert limiter.check(Tier.FREE, "personalize", "u", "k").allowed


def test_an_unknown_endpoint_is_an_error() -> None:
    with pytest.raises(ValueError, match="no rate limit"):
        RateLimiter(FakeClock()).check(Tier.FREE, "admin", "u", "k")
