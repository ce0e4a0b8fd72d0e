"""``coordination.leader`` on ``RedisLock`` against a real Redis, and the singleton trimmer
of the stream workers built on it.

Lease expiry is Redis's own (PX), so the tests that let a lease lapse wait real
milliseconds with short TTLs.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from coordination.leader import LeaderElection
from coordination.lock import Lease
from coordination.redis_lock import RedisLock
from decision_log.writer import Retention
from origin.event_streams.streams import ensure_groups
from origin.worker.consumer import StreamWorker
from origin.worker.retention import LogRetention
from perso.redis_server import RedisServer
from protocol import keys
from protocol.decisions import DECISION_FIELD, Decision, Shown, encode_decision
from protocol.events import FeedbackEvent
from tests.fakes import FakeClock
from tests.integration.test_stream_worker import (
    DIM,
    NOW,
    PARTITIONS,
    add_items,
    append,
    drain,
    event,
    until,
)

pytestmark = pytest.mark.cluster


OFFICE = "test-office"


def contender(
    redis: Redis,
    ttl_ms: int = 10_000,
    *,
    renew_every_s: float = 0.05,
    clock: Callable[[], float] | None = None,
    changes: list[Lease | None] | None = None,
) -> LeaderElection:
    lock = RedisLock(redis, FakeClock(), rng=random.Random(3).random)
    return LeaderElection(
        lock,
        OFFICE,
        ttl_ms,
        renew_every_s=renew_every_s,
        clock=clock if clock is not None else time.monotonic,
        on_change=changes.append if changes is not None else None,
    )


async def test_one_of_five_contenders_is_elected(redis: Redis) -> None:
    changes: list[Lease | None] = []
    elections = [contender(redis, changes=changes) for _ in range(5)]
    won = await asyncio.gather(*(e.try_become_leader() for e in elections))
    assert sorted(won) == [False] * 4 + [True]
    [leader] = [e for e, w in zip(elections, won, strict=True) if w]
    assert leader.is_leader
    assert leader.lease is not None
    assert leader.lease.fencing == 1
    assert [e.is_leader for e in elections].count(True) == 1
    assert all(e.lease is None and e.elected == 0 for e in elections if e is not leader)
    assert changes == [leader.lease]
    info = await RedisLock(redis, FakeClock()).info(OFFICE)
    assert info is not None
    assert info.token == leader.lease.token
    # campaigning again changes nothing: the leader stays, the others stay out
    assert await leader.try_become_leader()
    assert not any([await e.try_become_leader() for e in elections if e is not leader])
    assert leader.elected == 1


async def test_a_leader_that_renews_keeps_the_office_past_its_ttl(redis: Redis) -> None:
    leader, other = contender(redis, 300), contender(redis, 300)
    assert await leader.try_become_leader()
    for _ in range(4):  # 0.6 s in all, twice the TTL
        await asyncio.sleep(0.15)
        assert await leader.maintain()
        assert not await other.try_become_leader()
    assert leader.is_leader
    assert leader.lost == 0


async def test_a_leader_that_stops_renewing_is_replaced_by_a_higher_term(
    redis: Redis,
) -> None:
    # The old leader's clock is frozen: only Redis's refusal can tell it that it lost.
    frozen = FakeClock()
    changes: list[Lease | None] = []
    old = contender(redis, 100, renew_every_s=0.02, clock=frozen, changes=changes)
    new = contender(redis, 100, renew_every_s=0.02)
    assert await old.try_become_leader()
    old_lease = old.lease
    assert old_lease is not None
    await asyncio.sleep(0.15)  # no renewal: the lease lapses in Redis
    assert await new.try_become_leader()
    assert new.lease is not None
    assert new.lease.fencing > old_lease.fencing
    assert old.is_leader  # still believes it, by its own clock
    assert not await old.maintain()
    assert not old.is_leader
    assert old.lease is None
    assert (old.elected, old.lost) == (1, 1)
    assert changes == [old_lease, None]
    assert await new.maintain()  # the refused renewal took nothing from the new leader


async def test_a_lapsed_lease_is_given_up_by_the_local_clock_alone(redis: Redis) -> None:
    clock = FakeClock(now=0.0)
    leader = contender(redis, 1000, renew_every_s=0.2, clock=clock)
    other = contender(redis, 1000, renew_every_s=0.2)
    assert await leader.try_become_leader()
    clock.tick(1.0)  # paused past its TTL (by its own clock; Redis still has the lease)
    assert not leader.is_leader
    assert leader.lease is None
    assert not await leader.maintain()
    assert leader.lost == 1
    # it released the lease on stepping down: the next campaign need not wait
    assert await other.try_become_leader()
    assert not await leader.try_become_leader()


async def test_resigning_hands_the_office_over_at_once(redis: Redis) -> None:
    changes: list[Lease | None] = []
    leader = contender(redis, 60_000, changes=changes)
    successor = contender(redis, 60_000)
    assert await leader.try_become_leader()
    assert not await successor.try_become_leader()
    await leader.resign()
    assert not leader.is_leader
    assert (leader.resigned, leader.lost) == (1, 0)
    assert changes[-1] is None
    assert await successor.try_become_leader()
    assert successor.lease is not None
    assert successor.lease.fencing == 2
    await leader.resign()  # resigning again is a no-op
    assert leader.resigned == 1


async def test_an_unreachable_backend_ends_the_leadership(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis", persistent=False).start()
    client = Redis.from_url(server.url, socket_timeout=1.0, socket_connect_timeout=1.0)
    try:
        leader = contender(client, 10_000)
        assert await leader.try_become_leader()
        server.stop()
        assert not await leader.maintain()
        assert not leader.is_leader
        assert leader.lost == 1
        assert not await leader.try_become_leader()  # a failed campaign, not an error
        await leader.resign()  # nothing to release
    finally:
        await client.aclose()
        server.stop()


async def test_the_run_loop_runs_the_job_only_while_leading(redis: Redis) -> None:
    runs: list[tuple[str, int]] = []

    def job_of(name: str) -> Callable[[Lease], Coroutine[Any, Any, None]]:
        async def job(lease: Lease) -> None:
            runs.append((name, lease.fencing))

        return job

    a, b = contender(redis, 300), contender(redis, 300)
    stop_a, stop_b = asyncio.Event(), asyncio.Event()
    task_a = asyncio.create_task(a.run(job_of("a"), stop_a, every_s=0.01))
    await until(lambda: len(runs) >= 3)
    task_b = asyncio.create_task(b.run(job_of("b"), stop_b, every_s=0.01, campaign_every_s=0.02))
    await asyncio.sleep(0.4)  # past a's TTL: a renews, b keeps campaigning in vain
    assert set(runs) == {("a", 1)}
    assert not b.is_leader
    stop_a.set()
    await task_a
    assert a.resigned == 1
    await until(lambda: ("b", 2) in runs)
    assert b.is_leader
    stop_b.set()
    await task_b
    assert not await redis.exists(keys.lock(OFFICE))


async def test_the_run_loop_cancels_the_job_when_the_leadership_is_lost(redis: Redis) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()
    runs = 0

    async def job(lease: Lease) -> None:
        nonlocal runs
        runs += 1
        started.set()
        try:
            await asyncio.sleep(60)  # a long job, still running when the office is lost
        except asyncio.CancelledError:
            cancelled.set()
            raise

    leader = contender(redis, 300)
    stop = asyncio.Event()
    task = asyncio.create_task(leader.run(job, stop, every_s=0.01, campaign_every_s=0.02))
    await asyncio.wait_for(started.wait(), 5)
    # Someone takes the office (an operator's forced release, then another contender):
    # the leader's next renewal is refused.
    await redis.delete(keys.lock(OFFICE))
    usurper = contender(redis, 60_000)
    assert await usurper.try_become_leader()
    await asyncio.wait_for(cancelled.wait(), 5)
    assert leader.lost == 1
    assert not leader.is_leader
    await asyncio.sleep(0.1)  # still campaigning, in vain: the job is not run again
    assert runs == 1
    stop.set()
    await task
    assert usurper.is_leader
    assert await usurper.maintain()


# --- the singleton trimmer of the stream workers -------------------------------------------


# A week, and at most 50 entries a partition: the size cap is what these tests trim by.
SMALL = LogRetention(Retention(7 * 86_400.0, 50), Retention(7 * 86_400.0, 50))
# The most a partition keeps once trimmed to SMALL: trimming removes whole nodes of up to
# 100 entries.
KEPT_AT_MOST = 50 + 100


def trimming_worker(redis: Redis, consumer: str) -> StreamWorker:
    # claim_idle_ms 100 makes the upkeep 50 ms and the trimmer's lease 300 ms.
    return StreamWorker(
        redis,
        partitions=PARTITIONS,
        dim=DIM,
        consumer=consumer,
        clock=FakeClock(now=NOW),
        block_ms=50,
        claim_idle_ms=100,
        retention=SMALL,
    )


def events(first: int, n: int) -> list[FeedbackEvent]:
    return [event(first + i, user=f"u-{i % 30}") for i in range(n)]


async def stream_length(redis: Redis) -> int:
    return sum([await redis.xlen(s) for s in keys.events_streams(PARTITIONS)])


async def log_decisions(redis: Redis, n: int) -> None:
    for i in range(n):
        user = f"u-{i}"
        shown = (Shown("it-1", 1, 0.5, 1.0),)
        d = Decision(
            f"r-{i}", user, "user", "desktop_evening", "home", 0, "origin", "t", "1", "m", shown
        )
        stream = keys.decisions_stream(keys.partition_of(user, PARTITIONS))
        await redis.xadd(stream, {DECISION_FIELD: encode_decision(d)})


async def decision_log_length(redis: Redis) -> int:
    return sum([await redis.xlen(s) for s in keys.decisions_streams(PARTITIONS)])


async def test_only_the_elected_worker_trims(redis: Redis) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    a, b = trimming_worker(redis, "w-a"), trimming_worker(redis, "w-b")
    await append(redis, *events(0, 300))
    await log_decisions(redis, 10)
    await drain(a)
    assert a.stats.decisions == 10
    await a.upkeep()
    await b.upkeep()
    assert a.trimmer.is_leader
    assert not b.trimmer.is_leader
    assert a.stats.trimmed > 0
    assert b.stats.trimmed == 0
    assert await stream_length(redis) <= PARTITIONS * KEPT_AT_MOST
    # the decision log is read and acknowledged, but kept: it is within its retention
    # (offline evaluation and perso recompute read it)
    assert await decision_log_length(redis) == 10
    assert (await redis.hget(keys.worker_stats("w-a"), "trimmer")) == b"1"
    assert (await redis.hget(keys.worker_stats("w-b"), "trimmer")) == b"0"
    # the trimmer dies without resigning: once its lease lapses, the other takes over
    a_lease = a.trimmer.lease
    assert a_lease is not None
    await append(redis, *events(1000, 300))
    await drain(b)
    await asyncio.sleep(0.35)
    await b.upkeep()
    assert b.trimmer.is_leader
    assert b.stats.trimmed > 0
    assert b.trimmer.lease is not None
    assert b.trimmer.lease.fencing > a_lease.fencing


async def test_when_the_trimming_worker_stops_another_trims(redis: Redis) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    workers = {name: trimming_worker(redis, name) for name in ("w-a", "w-b")}
    stops = {name: asyncio.Event() for name in workers}
    tasks = {name: asyncio.create_task(w.run(stops[name])) for name, w in workers.items()}
    try:
        await append(redis, *events(0, 300))
        await until(lambda: sum(w.stats.trimmed for w in workers.values()) > 0)
        [first] = [n for n, w in workers.items() if w.stats.trimmed > 0]
        [second] = [n for n in workers if n != first]
        assert workers[first].trimmer.is_leader
        assert not workers[second].trimmer.is_leader
        stops[first].set()
        await tasks[first]  # a graceful stop resigns at once
        assert workers[first].trimmer.resigned == 1
        await append(redis, *events(1000, 300))
        await until(lambda: workers[second].stats.trimmed > 0)
        assert workers[second].trimmer.is_leader
        # Once every entry is applied, the next upkeeps bring each partition to its cap.
        for _ in range(250):
            if await stream_length(redis) <= PARTITIONS * KEPT_AT_MOST:
                break
            await asyncio.sleep(0.02)
        assert await stream_length(redis) <= PARTITIONS * KEPT_AT_MOST
    finally:
        for stop in stops.values():
            stop.set()
        await asyncio.gather(*tasks.values())
