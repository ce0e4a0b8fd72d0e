"""The Redis backend of ``coordination.lock.Lock``: one round trip per primitive.

Grant: ``SET lock:{r} token NX PX ttl`` and, only if it was set, ``INCR lock:{r}:fence``, in
one script, so the fencing token comes back with the grant and no grant goes without one.
Release and extend compare the token before they delete or re-expire (compare-and-delete,
compare-and-pexpire),
so a holder whose lease lapsed cannot free or prolong someone else's.
"""

from __future__ import annotations

import asyncio
import random
import secrets
from collections.abc import Awaitable, Callable

from coordination.heartbeat import Heartbeat
from coordination.lock import Lease, LockInfo, acquire_with_retry
from coordination.retry import DEFAULT, RetryPolicy
from protocol import keys
from redis_client.client import RedisClient


class RedisLock:
    """Leases on resources of one Redis; ``clock`` stamps ``Lease.acquired_at``."""

    # KEYS[1] lock, KEYS[2] fencing counter; ARGV[1] token, ARGV[2] ttl ms.
    # Returns the fencing token of the grant, or 0 when the resource is held.
    GRANT = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return redis.call('INCR', KEYS[2])
end
return 0
"""

    # KEYS[1] lock; ARGV[1] token. Returns 1 if released, 0 if the token no longer holds.
    RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""

    # KEYS[1] lock; ARGV[1] token, ARGV[2] ttl ms. Returns 1 if extended, else 0.
    EXTEND = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

    # KEYS[1] lock, KEYS[2] fencing counter. Returns {token, pttl ms, fencing} or nil.
    # The counter is the holder's fencing token: a grant needs the lock free, so the holder
    # is always the last grant.
    INFO = """
local token = redis.call('GET', KEYS[1])
if not token then
    return nil
end
return {token, redis.call('PTTL', KEYS[1]), tonumber(redis.call('GET', KEYS[2]) or '0')}
"""

    def __init__(
        self,
        redis: RedisClient,
        clock: Callable[[], float],
        *,
        rng: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._clock = clock
        self._rng = rng if rng is not None else random.Random().random
        self._sleep = sleep
        self._grant = redis.register_script(self.GRANT)
        self._release = redis.register_script(self.RELEASE)
        self._extend = redis.register_script(self.EXTEND)
        self._info = redis.register_script(self.INFO)
        self._redis = redis

    async def acquire(self, resource: str, ttl_ms: int, *, retry: RetryPolicy = DEFAULT) -> Lease:
        """Retries the ``GRANT`` call with ``retry``'s jittered waits, then ``LockNotAcquired``."""
        return await acquire_with_retry(
            self.try_acquire, resource, ttl_ms, retry, rng=self._rng, sleep=self._sleep
        )

    async def try_acquire(self, resource: str, ttl_ms: int) -> Lease | None:
        """One ``GRANT`` script call (SET NX PX, then INCR of the fence); None if the key is set."""
        if ttl_ms <= 0:
            raise ValueError("a lease needs a positive TTL")
        token = secrets.token_hex(16)
        acquired_at = self._clock()
        fencing = int(
            await self._grant(
                keys=[keys.lock(resource), keys.lock_fencing(resource)], args=[token, ttl_ms]
            )
        )
        if fencing == 0:
            return None
        return Lease(resource, token, fencing, acquired_at, ttl_ms)

    async def release(self, lease: Lease) -> bool:
        """One ``RELEASE`` script call: DEL only while the key still holds the lease's token."""
        released = await self._release(keys=[keys.lock(lease.resource)], args=[lease.token])
        return bool(released)

    async def is_locked(self, resource: str) -> bool:
        """One EXISTS on the lock key; Redis itself drops the key of a lease that lapsed."""
        return bool(await self._redis.exists(keys.lock(resource)))

    async def extend(self, lease: Lease, ttl_ms: int) -> bool:
        """One ``EXTEND`` script call: PEXPIRE to ``ttl_ms`` only while the token still holds."""
        if ttl_ms <= 0:
            raise ValueError("a lease needs a positive TTL")
        extended = await self._extend(keys=[keys.lock(lease.resource)], args=[lease.token, ttl_ms])
        return bool(extended)

    async def info(self, resource: str) -> LockInfo | None:
        """One ``INFO`` script call: the key's token and PTTL, the fence counter as its fencing."""
        reply = await self._info(keys=[keys.lock(resource), keys.lock_fencing(resource)])
        if reply is None:
            return None
        token, remaining_ms, fencing = reply
        if isinstance(token, bytes):
            token = token.decode()
        return LockInfo(resource, str(token), int(fencing), int(remaining_ms))

    def keep(self, lease: Lease, every_s: float) -> Heartbeat:
        """An ``async with`` that renews ``lease`` every ``every_s`` seconds; its ``lost``
        event is set when a renewal fails."""
        return Heartbeat(self, lease, every_s, sleep=self._sleep)
