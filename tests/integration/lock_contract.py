"""The contract every ``coordination.lock.Lock`` backend keeps, as one suite.

A backend's test module subclasses ``LockContract`` and provides a ``lock`` fixture (a
fresh backend with no resource held) and a ``redis`` fixture (the suite's Redis, which holds
the fenced store of the safety checker whatever the backend). Expiry is the backend's own,
so the expiry tests wait real milliseconds with short TTLs.

The safety checker at the end is the test that matters most: many clients take the lock,
hold it for random times, some pause well past their lease (a GC pause), and all of them
increment one counter by a fenced read-modify-write. Over thousands of rounds no two
sections that kept their lease may overlap, and no increment may be lost: the counter ends
equal to the number of writes the store accepted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time

import pytest
from redis.asyncio import Redis

from coordination.exceptions import LeaseLost, LockNotAcquired, StaleFencingToken
from coordination.fencing import FencedPointer, FencedValue
from coordination.heartbeat import Heartbeat
from coordination.lock import Lock, locked, with_lock
from coordination.retry import NO_RETRY, RetryPolicy

# Many short waits: every contender of a busy resource gets through.
PATIENT = RetryPolicy(attempts=5000, base_delay_s=0.001, max_delay_s=0.005)


class Boom(Exception):
    pass


class LockContract:
    """Subclass and provide ``lock`` and ``redis`` fixtures."""

    # A backend whose expiry is coarser (a monitor task) may raise these.
    short_ttl_ms = 40
    expiry_wait_s = 0.1
    # Whether each grant's token is the previous one + 1 (one counter per resource).
    consecutive_fencing = True
    # Whether the backend takes its clock from the module's ``clock`` fixture (FakeClock).
    injected_clock = True

    async def test_grant_stamps_lease_from_the_clock(
        self, lock: Lock, request: pytest.FixtureRequest
    ) -> None:
        if not self.injected_clock:
            pytest.skip("this backend times grants with the real monotonic clock")
        clock = request.getfixturevalue("clock")
        lease = await lock.try_acquire("deploy", 5000)
        assert lease is not None
        assert lease.fencing == 1
        assert lease.acquired_at == clock.now
        assert lease.expires_at == clock.now + 5
        assert len(lease.token) == 32

    async def test_fencing_tokens_are_consecutive_per_resource(self, lock: Lock) -> None:
        if not self.consecutive_fencing:
            pytest.skip("this backend's tokens increase but need not be consecutive")
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

    async def test_grant_and_info_name_the_holder(self, lock: Lock) -> None:
        lease = await lock.try_acquire("deploy", 5000)
        assert lease is not None
        assert (lease.resource, lease.ttl_ms) == ("deploy", 5000)
        assert lease.fencing >= 1
        assert await lock.is_locked("deploy")
        info = await lock.info("deploy")
        assert info is not None
        assert (info.resource, info.token, info.fencing) == ("deploy", lease.token, lease.fencing)
        assert 3000 < info.remaining_ms <= 5000
        assert await lock.info("elsewhere") is None
        assert not await lock.is_locked("elsewhere")

    async def test_a_held_resource_is_refused(self, lock: Lock) -> None:
        assert await lock.try_acquire("r", 5000) is not None
        assert await lock.try_acquire("r", 5000) is None
        with pytest.raises(LockNotAcquired):
            await lock.acquire("r", 5000, retry=NO_RETRY)
        with pytest.raises(LockNotAcquired):
            await lock.acquire("r", 5000, retry=RetryPolicy(3, 0.001, 0.002))
        assert await lock.try_acquire("other", 5000) is not None

    async def test_a_non_positive_ttl_is_refused(self, lock: Lock) -> None:
        with pytest.raises(ValueError, match="TTL"):
            await lock.try_acquire("r", 0)

    async def test_mutual_exclusion_under_concurrent_acquirers(self, lock: Lock) -> None:
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
        # Grants come in the order the critical sections ran: increasing tokens.
        assert fencings == sorted(set(fencings))

    async def test_many_resources_are_independent(self, lock: Lock) -> None:
        leases = await asyncio.gather(*(lock.acquire(f"r{i}", 5000) for i in range(20)))
        assert all(lease is not None for lease in leases)
        assert await lock.try_acquire("r7", 5000) is None
        assert all(await asyncio.gather(*(lock.release(lease) for lease in leases)))
        assert not any(await asyncio.gather(*(lock.is_locked(f"r{i}") for i in range(20))))

    async def test_fencing_tokens_increase_across_releases_and_expiries(self, lock: Lock) -> None:
        seen = []
        for _ in range(3):
            lease = await lock.acquire("r", 5000)
            seen.append(lease.fencing)
            assert await lock.release(lease)
        lease = await lock.acquire("r", self.short_ttl_ms)
        seen.append(lease.fencing)
        await asyncio.sleep(self.expiry_wait_s)
        seen.append((await lock.acquire("r", 5000)).fencing)
        assert seen == sorted(set(seen))

    async def test_release_by_a_non_holder_is_refused(self, lock: Lock) -> None:
        lease = await lock.acquire("r", 5000)
        impostor = dataclasses.replace(lease, token="0" * 32)
        assert not await lock.release(impostor)
        assert not await lock.extend(impostor, 10_000)
        assert await lock.is_locked("r")
        assert await lock.release(lease)
        assert not await lock.is_locked("r")
        assert not await lock.release(lease)

    async def test_extend_keeps_the_lease(self, lock: Lock) -> None:
        lease = await lock.acquire("r", 2 * self.short_ttl_ms)
        assert await lock.extend(lease, 5000)
        await asyncio.sleep(2 * self.expiry_wait_s)
        info = await lock.info("r")
        assert info is not None
        assert info.token == lease.token
        assert info.remaining_ms > 3000

    async def test_expiry_frees_the_resource_and_the_old_lease_is_dead(self, lock: Lock) -> None:
        first = await lock.acquire("r", self.short_ttl_ms)
        await asyncio.sleep(self.expiry_wait_s)
        assert not await lock.is_locked("r")
        assert not await lock.extend(first, 5000)
        second = await lock.try_acquire("r", 5000)
        assert second is not None
        assert second.fencing > first.fencing
        assert not await lock.release(first)
        assert await lock.is_locked("r")

    async def test_context_manager_releases_on_exception(self, lock: Lock) -> None:
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
        self, lock: Lock
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

    async def test_heartbeat_keeps_a_lease_past_its_ttl(self, lock: Lock) -> None:
        ttl_ms = 3 * self.short_ttl_ms
        lease = await lock.acquire("r", ttl_ms)
        async with Heartbeat(lock, lease, ttl_ms / 1000 / 4) as heartbeat:
            await asyncio.sleep(3 * ttl_ms / 1000)
            assert await lock.is_locked("r")
            assert not heartbeat.lost.is_set()
            assert heartbeat.renewals >= 5
        info = await lock.info("r")
        assert info is not None
        assert info.token == lease.token

    async def test_heartbeat_signals_lost_after_an_expiry(self, lock: Lock) -> None:
        # The holder stalls longer than its TTL between two renewals (a paused process).
        lease = await lock.acquire("r", self.short_ttl_ms)
        stalls = [self.expiry_wait_s, 0.0]

        async def stalled_sleep(_: float) -> None:
            await asyncio.sleep(stalls.pop(0) if stalls else 0.01)

        thief: list[object] = []
        async with Heartbeat(lock, lease, self.short_ttl_ms / 2000, sleep=stalled_sleep) as beat:
            beat.check()  # held: the holder may write
            await asyncio.wait_for(beat.lost.wait(), timeout=2)
            with pytest.raises(LeaseLost):
                beat.check()  # lost: it stops before its next write
            thief.append(await lock.try_acquire("r", 5000))
        assert thief[0] is not None

    async def test_a_paused_holders_late_write_is_refused(self, lock: Lock, redis: Redis) -> None:
        pointer = FencedPointer(redis, "test:fenced")
        a = await lock.acquire("deploy", self.short_ttl_ms)
        assert await pointer.write(b"a-1", a.fencing)
        # A pauses past its lease (a GC pause); B is granted the lock and writes.
        await asyncio.sleep(self.expiry_wait_s)
        b = await lock.acquire("deploy", 5000)
        assert b.fencing > a.fencing
        assert await pointer.write(b"b-1", b.fencing)
        # A wakes, still believing it holds the lock: its write is refused.
        assert not await pointer.write(b"a-2", a.fencing)
        assert await pointer.read() == FencedValue(b"b-1", b.fencing)
        # The holder may write again under its own lease.
        assert await pointer.write(b"b-2", b.fencing)
        assert await pointer.read() == FencedValue(b"b-2", b.fencing)

    async def test_safety_checker(self, lock: Lock, redis: Redis) -> None:
        """Many clients, random holds, random pauses past the lease, one fenced counter."""
        rng = random.Random(2026)
        counter = FencedPointer(redis, "test:counter")
        ttl_ms = 2 * self.short_ttl_ms
        rounds_per_client, clients = 250, 8
        sections: list[tuple[float, float, bool]] = []  # start, end, kept its lease
        accepted = refused = 0

        async def client(seed: int) -> None:
            nonlocal accepted, refused
            own = random.Random(seed)
            for _ in range(rounds_per_client):
                lease = await lock.acquire("checker", ttl_ms, retry=PATIENT)
                start = time.monotonic()
                try:
                    current = await counter.read_as(lease.fencing)
                    value = int(current.value) if current else 0
                    # Mostly short holds; one in 100 pauses past the lease.
                    if own.random() < 0.01:
                        await asyncio.sleep(ttl_ms / 1000 * 1.5)
                    elif own.random() < 0.5:
                        await asyncio.sleep(own.random() * ttl_ms / 1000 / 50)
                    if await counter.write(value + 1, lease.fencing):
                        accepted += 1
                    else:
                        refused += 1
                except StaleFencingToken:
                    refused += 1
                end = time.monotonic()
                # Kept: ended with a margin inside its TTL on the local clock.
                kept = (end - start) * 1000 < ttl_ms * 0.8
                sections.append((start, end, kept))
                await lock.release(lease)

        await asyncio.gather(*(client(rng.randrange(1 << 30)) for _ in range(clients)))

        final = await counter.read()
        assert final is not None
        assert int(final.value) == accepted  # no lost update
        assert accepted + refused == clients * rounds_per_client
        assert refused > 0  # the pauses did make stale holders, and they were refused
        overlaps, latest_end = 0, 0.0
        for start, end in sorted((s, e) for s, e, k in sections if k):
            overlaps += start < latest_end
            latest_end = max(latest_end, end)
        assert overlaps == 0
