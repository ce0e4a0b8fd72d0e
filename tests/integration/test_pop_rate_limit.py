"""Rate limits shared by a PoP's edge processes (``edge.limits.pop_rate_limit``) on the real Redis:
the script against ``edge.limits.gcra``'s arithmetic, several processes' clients on one user and
on one API key, both-or-neither, and failing open while the store is away.

They run in the cluster tier too (a PoP store on a Redis Cluster is one slot), but for the
one that stops a server of its own."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest

from edge.limits.gcra import Rate, take_both
from edge.limits.pop_rate_limit import OPEN_S, PopRateLimiter
from edge.limits.rate_limit import RateLimiter
from perso.redis_server import RedisServer, ping
from protocol import keys
from protocol.tiers import Tier, TierLimit
from redis_client.client import RedisClient, connect, open_client
from tests.fakes import FakeClock

REGION = "us-east"
NOW_US = 1_767_225_600 * 1_000_000

Limits = Mapping[Tier, Mapping[str, TierLimit]]
SMALL: Limits = {Tier.FREE: {"personalize": TierLimit(per_user_rps=2, total_rps=3)}}


def limiter(
    redis: RedisClient, limits: Limits = SMALL, clock: FakeClock | None = None
) -> PopRateLimiter:
    clock = clock or FakeClock()
    return PopRateLimiter(
        redis, REGION, fallback=RateLimiter(clock, limits=limits), clock=clock, limits=limits
    )


@pytest.fixture
async def processes(redis_url: str, redis: RedisClient) -> AsyncIterator[list[RedisClient]]:
    """Three clients of the store, as three edge processes have."""
    clients = [await open_client(redis_url) for _ in range(3)]
    yield clients
    for client in clients:
        await client.aclose()


async def stored_tat(redis: RedisClient, key: str) -> float | None:
    raw = await redis.get(key)
    return None if raw is None else float(raw)


@pytest.mark.cluster
async def test_the_script_computes_what_gcra_computes(redis: RedisClient) -> None:
    """Random requests of a few users of two API keys at random times, checked by the
    script with its clock given, and by ``edge.limits.gcra`` with the TATs it left: the same
    decisions, waits and stored times, to the bit."""
    rng = random.Random(7)
    limits: Limits = {
        Tier.FREE: {
            "personalize": TierLimit(per_user_rps=3, total_rps=7),
            "fill": TierLimit(per_user_rps=0.5, total_rps=2.5, per_user_burst=4),
        }
    }
    pop = limiter(redis, limits)
    now = NOW_US
    seen = {"allowed": 0, "user": 0, "total": 0}
    for _ in range(400):
        now += rng.choice([0, 0, rng.randrange(0, 400_000)])
        endpoint = rng.choice(["personalize", "fill"])
        user, api_key = rng.choice("abc"), rng.choice(["k1", "k2"])
        user_key = keys.rate_limit_user(REGION, api_key, endpoint, user)
        total_key = keys.rate_limit_total(REGION, api_key, endpoint)
        before = (await stored_tat(redis, user_key), await stored_tat(redis, total_key))
        limit = limits[Tier.FREE][endpoint]
        expected = take_both(
            # An expired key is absent in Redis; GCRA treats a past TAT alike.
            *before,
            now,
            user=Rate.of(limit.per_user_rps, limit.per_user_burst),
            total=Rate.of(limit.total_rps),
        )
        got = await pop.check(Tier.FREE, endpoint, user, api_key, at_us=now)
        assert got == expected.decision
        seen[got.scope or "allowed"] += 1
        after = (await stored_tat(redis, user_key), await stored_tat(redis, total_key))
        if got.allowed:
            assert after == (expected.user_tat_us, expected.total_tat_us)
        else:
            assert after == before
    assert min(seen.values()) > 20, seen  # every branch was taken, many times


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("requests", "allowed"),
    [
        # Two users have their own limits; the key's total (3) refuses the fourth.
        ([("a", "k"), ("a", "k"), ("b", "k"), ("b", "k")], [True, True, True, False]),
        # A request the user limit refuses takes nothing from the total.
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
async def test_both_or_neither(
    redis: RedisClient, requests: list[tuple[str, str]], allowed: list[bool]
) -> None:
    pop = limiter(redis)
    got = [
        (await pop.check(Tier.FREE, "personalize", user, key, at_us=NOW_US)).allowed
        for user, key in requests
    ]
    assert got == allowed


@pytest.mark.cluster
async def test_a_refusal_by_the_total_leaves_the_user_untouched(redis: RedisClient) -> None:
    pop = limiter(redis)
    for user in ("a", "b", "c"):
        assert (await pop.check(Tier.FREE, "personalize", user, "k", at_us=NOW_US)).allowed
    user_key = keys.rate_limit_user(REGION, "k", "personalize", "d")
    refused = await pop.check(Tier.FREE, "personalize", "d", "k", at_us=NOW_US)
    assert (refused.allowed, refused.scope) == (False, "total")
    assert refused.retry_after_s == pytest.approx(1 / 3)
    assert await redis.exists(user_key) == 0
    # A third of a second on, the total has one request again: d gets it, with its burst.
    later = NOW_US + 333_334
    assert (await pop.check(Tier.FREE, "personalize", "d", "k", at_us=later)).allowed


@pytest.mark.cluster
async def test_keys_share_the_api_keys_slot_and_expire_when_their_time_has_passed(
    redis: RedisClient,
) -> None:
    user_key = keys.rate_limit_user(REGION, "acme", "personalize", "u-1")
    total_key = keys.rate_limit_total(REGION, "acme", "personalize")
    assert user_key == "rl:{us-east:acme}:u:personalize:u-1"
    assert total_key == "rl:{us-east:acme}:t:personalize"
    pop = limiter(redis, {Tier.FREE: {"personalize": TierLimit(per_user_rps=5, total_rps=50)}})
    # The store's own clock: the keys live one interval past it.
    assert (await pop.check(Tier.FREE, "personalize", "u-1", "acme")).allowed
    assert 0 < await redis.pttl(user_key) <= 200
    assert 0 < await redis.pttl(total_key) <= 20
    await asyncio.sleep(0.25)
    assert await redis.exists(user_key, total_key) == 0


async def hammer(
    limiters: list[PopRateLimiter], users: list[str], seconds: float, tasks: int = 24
) -> tuple[int, float]:
    """``tasks`` concurrent callers, each asking for a random user through a random
    process, as fast as they can for ``seconds``: (requests let through, seconds it took)."""
    rng = random.Random(3)
    allowed = 0
    started = time.perf_counter()
    deadline = started + seconds

    async def caller() -> None:
        nonlocal allowed
        while time.perf_counter() < deadline:
            pop = rng.choice(limiters)
            decision = await pop.check(Tier.FREE, "personalize", rng.choice(users), "k")
            allowed += decision.allowed

    await asyncio.gather(*(caller() for _ in range(tasks)))
    return allowed, time.perf_counter() - started


@pytest.mark.cluster
async def test_processes_hammering_one_user_never_exceed_the_limit(
    processes: list[RedisClient],
) -> None:
    rate = 20.0
    limits: Limits = {Tier.FREE: {"personalize": TierLimit(per_user_rps=rate, total_rps=1e5)}}
    pops = [limiter(client, limits) for client in processes]
    allowed, took = await hammer(pops, ["u"], seconds=1.5)
    # One burst, then one per interval: never more; and with requests always waiting,
    # most intervals are used (the lower bound leaves room for a busy machine).
    assert allowed <= rate + rate * took + 1, (allowed, took)
    assert allowed >= rate + rate * took * 0.5, (allowed, took)
    assert sum(pop.counters.shared for pop in pops) > 5 * allowed  # most were refused
    assert all(pop.counters.process == 0 for pop in pops)


@pytest.mark.cluster
async def test_processes_hammering_many_users_never_exceed_the_api_keys_total(
    processes: list[RedisClient],
) -> None:
    total = 30.0
    limits: Limits = {Tier.FREE: {"personalize": TierLimit(per_user_rps=1e3, total_rps=total)}}
    pops = [limiter(client, limits) for client in processes]
    allowed, took = await hammer(pops, [f"u-{n}" for n in range(50)], seconds=1.5)
    assert allowed <= total + total * took + 1, (allowed, took)
    assert allowed >= total + total * took * 0.5, (allowed, took)


async def test_an_unreachable_store_fails_open_to_the_processs_own_buckets(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="edge.limits.pop_rate_limit")
    server = RedisServer(tmp_path / "pop", persistent=False).start()
    client = connect(server.url, socket_timeout=0.5, socket_connect_timeout=0.5)
    clock = FakeClock()
    pop = limiter(client, clock=clock)
    try:
        assert (await pop.check(Tier.FREE, "personalize", "a", "k")).allowed
        assert (pop.counters.shared, pop.counters.process) == (1, 0)
        server.kill()
        # The process's own buckets decide: a's full burst there (2), then refused.
        decided = [(await pop.check(Tier.FREE, "personalize", "a", "k")).allowed for _ in range(3)]
        assert decided == [True, True, False]
        # One failure opened the breaker: the next checks did not wait on the store.
        assert (pop.counters.store_errors, pop.counters.process) == (1, 3)
        assert "PoP store unreachable for rate limits" in caplog.text
        server.relaunch()
        assert port_answers(server)
        clock.tick(OPEN_S)
        assert (await pop.check(Tier.FREE, "personalize", "b", "k")).allowed
        assert pop.counters.shared == 2
        assert "rate limits are shared by the PoP" in caplog.text
    finally:
        await client.aclose()
        server.stop()


def port_answers(server: RedisServer) -> bool:
    assert server.port is not None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if ping(server.host, server.port):
            return True
        time.sleep(0.02)
    return False


@pytest.mark.cluster
async def test_the_check_is_one_round_trip_with_the_time_of_the_store(redis: RedisClient) -> None:
    """Two checks a TAT apart by the store's clock: the script reads TIME itself, so the
    answer does not depend on this process's clock (the limiter is given a frozen one)."""
    pop = limiter(redis, {Tier.FREE: {"explain": TierLimit(per_user_rps=10, total_rps=100)}})
    assert (await pop.check(Tier.FREE, "explain", "u", "k")).allowed
    refused = [await pop.check(Tier.FREE, "explain", "u", "k") for _ in range(12)]
    assert sum(d.allowed for d in refused) <= 10
    assert not refused[-1].allowed
    await asyncio.sleep(0.15)
    assert (await pop.check(Tier.FREE, "explain", "u", "k")).allowed
