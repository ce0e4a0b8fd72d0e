"""``coordination.RedisLock`` against a real Redis: the lock contract
(``tests.integration.lock_contract``) and what only this backend promises.

Lease expiry is Redis's own (PX), so the expiry tests wait real milliseconds with short TTLs;
the lock's clock only stamps leases and is a fake.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from redis.asyncio import Redis

from coordination.exceptions import StaleFencingToken
from coordination.fencing import FencedPointer, FencedValue
from coordination.lock import locked
from coordination.redis_lock import RedisLock
from protocol import keys
from tests.fakes import FakeClock
from tests.integration.lock_contract import PATIENT, LockContract


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def lock(redis: Redis, clock: FakeClock) -> RedisLock:
    return RedisLock(redis, clock, rng=random.Random(7).random)


class TestRedisLockContract(LockContract):
    pass


async def test_grant_stamps_lease_from_the_clock(lock: RedisLock, clock: FakeClock) -> None:
    lease = await lock.try_acquire("deploy", 5000)
    assert lease is not None
    assert lease.fencing == 1
    assert lease.acquired_at == clock.now
    assert lease.expires_at == clock.now + 5
    assert len(lease.token) == 32


async def test_fencing_tokens_are_consecutive_per_resource(lock: RedisLock) -> None:
    fencings: list[int] = []

    async def worker() -> None:
        for _ in range(3):
            async with locked(lock, "counter", 5000, retry=PATIENT) as lease:
                fencings.append(lease.fencing)
                await asyncio.sleep(0.001)

    await asyncio.gather(*(worker() for _ in range(8)))
    assert fencings == list(range(1, 25))
    # Each resource counts its own grants.
    assert (await lock.acquire("s", 5000)).fencing == 1


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


async def test_fenced_pointer_starts_empty_and_accepts_any_first_token(redis: Redis) -> None:
    pointer = FencedPointer(redis, "test:pointer")
    assert await pointer.read() is None
    assert await pointer.write(7, 5)
    assert await pointer.read() == FencedValue(b"7", 5)
    assert not await pointer.write(8, 4)
    assert await pointer.write(9, 6)
    assert await pointer.read() == FencedValue(b"9", 6)


async def test_a_fenced_read_shuts_out_older_holders(redis: Redis) -> None:
    pointer = FencedPointer(redis, "test:pointer")
    assert await pointer.read_as(3) is None
    # A holder of 2 can neither read nor write once 3 has read.
    with pytest.raises(StaleFencingToken):
        await pointer.read_as(2)
    assert not await pointer.write(b"late", 2)
    assert await pointer.write(b"v", 3)
    assert await pointer.read_as(3) == FencedValue(b"v", 3)
    assert await pointer.read_as(4) == FencedValue(b"v", 3)
    assert not await pointer.write(b"late", 3)
