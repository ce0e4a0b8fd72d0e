"""``coordination.RedisLock`` and the fenced pointer against a real Redis.

Lease expiry is Redis's own (PX), so the expiry tests wait real milliseconds with short TTLs;
the lock's clock only stamps leases and is a fake.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random

import pytest
from redis.asyncio import Redis

from coordination.exceptions import LockNotAcquired
from coordination.fencing import FencedPointer, FencedValue
from coordination.lock import locked, with_lock
from coordination.redis_lock import RedisLock
from coordination.retry import NO_RETRY, RetryPolicy
from protocol import keys
from tests.fakes import FakeClock

# Many short waits: 32 contenders on one resource all get through.
PATIENT = RetryPolicy(attempts=2000, base_delay_s=0.001, max_delay_s=0.005)


class Boom(Exception):
    pass


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def lock(redis: Redis, clock: FakeClock) -> RedisLock:
    return RedisLock(redis, clock, rng=random.Random(7).random)


async def test_grant_stamps_lease_and_info_names_the_holder(
    lock: RedisLock, clock: FakeClock
) -> None:
    lease = await lock.try_acquire("deploy", 5000)
    assert lease is not None
    assert (lease.resource, lease.fencing, lease.ttl_ms) == ("deploy", 1, 5000)
    assert lease.acquired_at == clock.now
    assert lease.expires_at == clock.now + 5
    assert len(lease.token) == 32
    assert await lock.is_locked("deploy")
    info = await lock.info("deploy")
    assert info is not None
    assert (info.resource, info.token, info.fencing) == ("deploy", lease.token, 1)
    assert 4000 < info.remaining_ms <= 5000
    assert await lock.info("elsewhere") is None


async def test_a_held_resource_is_refused(lock: RedisLock) -> None:
    assert await lock.try_acquire("r", 5000) is not None
    assert await lock.try_acquire("r", 5000) is None
    with pytest.raises(LockNotAcquired):
        await lock.acquire("r", 5000, retry=NO_RETRY)
    with pytest.raises(LockNotAcquired):
        await lock.acquire("r", 5000, retry=RetryPolicy(3, 0.001, 0.002))
    assert await lock.try_acquire("other", 5000) is not None


async def test_mutual_exclusion_under_concurrent_acquirers(lock: RedisLock) -> None:
    inside = 0
    overlaps = 0
    fencings: list[int] = []

    async def worker() -> None:
        nonlocal inside, overlaps
        for _ in range(3):
            async with locked(lock, "counter", 5000, retry=PATIENT) as lease:
                inside += 1
                overlaps += inside > 1
                fencings.append(lease.fencing)
                await asyncio.sleep(0.001)
                inside -= 1

    await asyncio.gather(*(worker() for _ in range(32)))
    assert overlaps == 0
    assert len(fencings) == 96
    # Grants come in the order the critical sections ran: strictly increasing tokens.
    assert fencings == list(range(1, 97))


async def test_fencing_tokens_increase_across_grants_and_expiries(lock: RedisLock) -> None:
    seen = []
    for _ in range(3):
        lease = await lock.acquire("r", 5000)
        seen.append(lease.fencing)
        assert await lock.release(lease)
    lease = await lock.acquire("r", 30)
    seen.append(lease.fencing)
    await asyncio.sleep(0.06)
    seen.append((await lock.acquire("r", 5000)).fencing)
    assert seen == [1, 2, 3, 4, 5]
    # Each resource counts its own grants.
    assert (await lock.acquire("s", 5000)).fencing == 1


async def test_release_by_a_non_holder_is_refused(lock: RedisLock) -> None:
    lease = await lock.acquire("r", 5000)
    impostor = dataclasses.replace(lease, token="0" * 32)
    assert not await lock.release(impostor)
    assert not await lock.extend(impostor, 10_000)
    assert await lock.is_locked("r")
    assert await lock.release(lease)
    assert not await lock.is_locked("r")
    assert not await lock.release(lease)


async def test_extend_keeps_the_lease(lock: RedisLock) -> None:
    lease = await lock.acquire("r", 80)
    assert await lock.extend(lease, 5000)
    await asyncio.sleep(0.15)
    info = await lock.info("r")
    assert info is not None
    assert info.token == lease.token
    assert info.remaining_ms > 4000


async def test_expiry_frees_the_resource_and_the_old_lease_is_dead(lock: RedisLock) -> None:
    first = await lock.acquire("r", 30)
    await asyncio.sleep(0.06)
    assert not await lock.is_locked("r")
    assert not await lock.extend(first, 5000)
    second = await lock.try_acquire("r", 5000)
    assert second is not None
    assert second.fencing == first.fencing + 1
    assert not await lock.release(first)
    assert await lock.is_locked("r")


async def test_context_manager_releases_on_exception(lock: RedisLock) -> None:
    held: list[bool] = []

    async def fail_inside() -> None:
        async with locked(lock, "r", 5000):
            held.append(await lock.is_locked("r"))
            raise Boom

    with pytest.raises(Boom):
        await fail_inside()
    assert held == [True]
    assert not await lock.is_locked("r")


async def test_decorator_holds_during_the_call_and_releases_on_exception(
    lock: RedisLock,
) -> None:
    @with_lock(lock, "job", 5000, retry=NO_RETRY)
    async def job(fail: bool) -> bool:
        if fail:
            raise Boom
        return await lock.is_locked("job")

    assert await job(False)
    assert not await lock.is_locked("job")
    with pytest.raises(Boom):
        await job(True)
    assert not await lock.is_locked("job")
    # A held resource makes the decorated call fail without running it.
    held = await lock.acquire("job", 5000)
    with pytest.raises(LockNotAcquired):
        await job(False)
    assert await lock.release(held)


async def test_heartbeat_keeps_a_lease_past_its_ttl(lock: RedisLock) -> None:
    lease = await lock.acquire("r", 100)
    async with lock.keep(lease, 0.02) as heartbeat:
        await asyncio.sleep(0.3)
        assert await lock.is_locked("r")
        assert not heartbeat.lost.is_set()
        assert heartbeat.renewals >= 5
    info = await lock.info("r")
    assert info is not None
    assert info.token == lease.token
    # Once the heartbeat stopped, the lease lapses on its own.
    await asyncio.sleep(0.15)
    assert not await lock.is_locked("r")


async def test_heartbeat_signals_lost_when_the_key_is_deleted(
    lock: RedisLock, redis: Redis
) -> None:
    lease = await lock.acquire("r", 1000)
    async with lock.keep(lease, 0.02) as heartbeat:
        await redis.delete(keys.lock("r"))
        await asyncio.wait_for(heartbeat.lost.wait(), timeout=1)


async def test_heartbeat_signals_lost_when_another_holder_took_over(
    lock: RedisLock, redis: Redis
) -> None:
    lease = await lock.acquire("r", 1000)
    async with lock.keep(lease, 0.02) as heartbeat:
        await redis.delete(keys.lock("r"))
        thief = await lock.acquire("r", 5000)
        await asyncio.wait_for(heartbeat.lost.wait(), timeout=1)
    assert (await lock.info("r")) is not None
    assert await lock.release(thief)


async def test_heartbeat_must_renew_within_the_ttl(lock: RedisLock) -> None:
    lease = await lock.acquire("r", 100)
    with pytest.raises(ValueError, match="TTL"):
        lock.keep(lease, 0.1)


async def test_a_paused_holders_late_write_is_refused(lock: RedisLock, redis: Redis) -> None:
    pointer = FencedPointer(redis, keys.MODEL_EPOCH)
    a = await lock.acquire("deploy", 40)
    assert a.fencing == 1
    assert await pointer.write(b"a-1", a.fencing)
    # A pauses past its lease (a GC pause); B is granted the lock and writes.
    await asyncio.sleep(0.08)
    b = await lock.acquire("deploy", 5000)
    assert b.fencing == 2
    assert await pointer.write(b"b-1", b.fencing)
    # A wakes, still believing it holds the lock: its write is refused.
    assert not await pointer.write(b"a-2", a.fencing)
    assert await pointer.read() == FencedValue(b"b-1", 2)
    # The holder may write again under its own lease.
    assert await pointer.write(b"b-2", b.fencing)
    assert await pointer.read() == FencedValue(b"b-2", 2)


async def test_fenced_pointer_starts_empty_and_accepts_any_first_token(redis: Redis) -> None:
    pointer = FencedPointer(redis, keys.MODEL_EPOCH)
    assert await pointer.read() is None
    assert await pointer.write(7, 5)
    assert await pointer.read() == FencedValue(b"7", 5)
    assert not await pointer.write(8, 4)
    assert await pointer.write(9, 6)
    assert await pointer.read() == FencedValue(b"9", 6)
