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
from coordination.fencing import FencedHashes, FencedPointer, FencedValue
from coordination.redis_lock import RedisLock
from protocol import keys
from tests.fakes import FakeClock
from tests.integration.lock_contract import LockContract

pytestmark = pytest.mark.cluster


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def lock(redis: Redis, clock: FakeClock) -> RedisLock:
    return RedisLock(redis, clock, rng=random.Random(7).random)


class TestRedisLockContract(LockContract):
    pass


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


async def test_a_fenced_hash_is_replaced_whole_and_read_under_a_token(redis: Redis) -> None:
    hashes = FencedHashes(redis)
    assert await hashes.read("test:hash") == ({}, None)
    await hashes.replace("test:hash", {"a": "1", "b": "2"}, 4)
    assert await hashes.read_as("test:hash", 4) == ({b"a": b"1", b"b": b"2"}, 4)
    # Replaced whole: "b" goes with the write that leaves it out.
    await hashes.replace("test:hash", {"a": "3"}, 5)
    assert await hashes.read("test:hash") == ({b"a": b"3"}, 5)
    # A holder of 5 read after 6 did: refused, for a read and for a write.
    assert await hashes.read_as("test:hash", 6) == ({b"a": b"3"}, 5)
    with pytest.raises(StaleFencingToken):
        await hashes.read_as("test:hash", 5)
    with pytest.raises(StaleFencingToken):
        await hashes.replace("test:hash", {"a": "late"}, 5)
    assert await hashes.read("test:hash") == ({b"a": b"3"}, 5)
