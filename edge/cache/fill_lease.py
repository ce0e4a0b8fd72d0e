"""One origin fill per cache key per PoP: a fill lease in the PoP store.

``edge.cache.coalesce`` makes one fill per key at a time within a process; the edge processes
of a PoP that share a store (``PERSO_EDGE_STORE=redis``) would still make one each. Before
a process fills a key it takes the key's lease in the store (``SET NX PX`` of a random
token, ``protocol.edge_entry_keys.EdgeEntryKeys.fill_lease``, in the store's hash tag): the
process that gets it leads. It reads the store once more (another process may have stored the
entry between its own miss and its lease), fills, stores the entry and releases the lease
(compare-and-delete: never a later leader's). The others follow: they poll the lease
with a short jittered back-off (``resilience.backoff``; a few ms, doubling to
``POLL_MAX_S``) and once it is gone read the entry from the store and serve it. A lease
gone with no entry they can use (the leader's fill failed, or its answer was not to be
stored) is taken by one of them, which then leads. Whoever has waited ``wait_s``
(``PERSO_EDGE_COALESCE_WAIT_MS``) fills for itself: a leader that died must not stall its
key, and its lease, whose TTL is that same wait, expires by then.

Polling, not a notification: a keyspace or pub/sub message would need a subscriber per
process and, on a Redis Cluster, sharded pub/sub on the store's slot (Redis 7); a follower
polls a handful of times over a fill's tens of milliseconds, at one ``EXISTS`` each. A
store that cannot be reached fails open: the process fills for itself (counted), as it
would without a PoP store.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from redis.exceptions import RedisError

from protocol.edge_entry_keys import EdgeEntryKeys
from redis_client.client import RedisClient
from resilience.backoff import Backoff

log = logging.getLogger(__name__)

T = TypeVar("T")

# A follower's first poll comes this soon (a fill from a warm origin takes a few ms) and
# the polls space out to at most POLL_MAX_S: fewer round trips while a slow fill runs.
POLL_FIRST_S = 0.004
POLL_MAX_S = 0.05

_STORE_ERRORS = (RedisError, OSError, TimeoutError)


@dataclass
class LeaseCounters:
    led: int = 0  # fills this process made holding the key's lease
    found: int = 0  # leases taken to find the entry stored already (no fill)
    followed: int = 0  # fills another process made, whose entry this one served
    waited_out: int = 0  # followers that waited wait_s and filled for themselves
    unreachable: int = 0  # fills made without a lease: the store failed


class FillLeases:
    """The fill leases of one PoP store (``prefix``: ``keys.edge_entry_prefix``)."""

    # KEYS[1] the lease   ARGV[1] the holder's token
    # Returns 1 when the lease was the holder's and is released, 0 otherwise.
    RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

    def __init__(
        self,
        redis: RedisClient,
        prefix: str,
        *,
        wait_s: float,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        draw: Callable[[], float] = random.random,
    ) -> None:
        if wait_s <= 0:
            raise ValueError(f"wait_s must be > 0, got {wait_s}")
        self._redis = redis
        self._keys = EdgeEntryKeys(prefix)
        self._wait_s = wait_s
        self._lease_ms = max(1, round(wait_s * 1000))
        self._clock = clock
        self._sleep = sleep
        self._draw = draw
        self._release = redis.register_script(self.RELEASE)
        self.counters = LeaseCounters()

    # --- one round trip each ---------------------------------------------------------------

    async def acquire(self, key: str) -> str | None:
        """The lease of ``key`` for ``wait_s``: its token, or None while another holds it."""
        token = secrets.token_hex(16)
        taken = await self._redis.set(self._keys.fill_lease(key), token, nx=True, px=self._lease_ms)
        return token if taken else None

    async def release(self, key: str, token: str) -> bool:
        """Release the lease of ``key`` if ``token`` still holds it."""
        return bool(await self._release(keys=[self._keys.fill_lease(key)], args=[token]))

    async def held(self, key: str) -> bool:
        """Does anyone hold the lease of ``key`` now?"""
        return bool(await self._redis.exists(self._keys.fill_lease(key)))

    # --- the policy --------------------------------------------------------------------------

    async def run(
        self,
        key: str,
        fill: Callable[[], Awaitable[T]],
        stored: Callable[[], Awaitable[T | None]],
    ) -> T:
        """``fill()``'s result, made by this process holding the lease of ``key``, or
        ``stored()``'s (the entry another process's fill left in the store, when it will
        do) once that process released the lease; ``fill()`` again after ``wait_s``."""
        deadline = self._clock() + self._wait_s
        backoff = Backoff(base_s=POLL_FIRST_S, cap_s=POLL_MAX_S, jitter="equal", draw=self._draw)
        while True:
            try:
                token = await self.acquire(key)
            except _STORE_ERRORS as exc:
                return await self._unreachable(key, fill, exc)
            if token is not None:
                return await self._lead(key, token, fill, stored)
            # Another process fills the key: wait for its lease to go.
            while True:
                left = deadline - self._clock()
                if left <= 0:
                    self.counters.waited_out += 1
                    return await fill()
                await self._sleep(min(backoff.next(), left))
                try:
                    if await self.held(key):
                        continue
                    entry = await stored()
                except _STORE_ERRORS as exc:
                    return await self._unreachable(key, fill, exc)
                if entry is not None:
                    self.counters.followed += 1
                    return entry
                break  # released with nothing to serve: take the lease, or see who did

    async def _lead(
        self,
        key: str,
        token: str,
        fill: Callable[[], Awaitable[T]],
        stored: Callable[[], Awaitable[T | None]],
    ) -> T:
        try:
            try:
                entry = await stored()
            except _STORE_ERRORS:
                entry = None  # the fill's own put will tell; the lease is held meanwhile
            if entry is not None:
                self.counters.found += 1
                return entry
            self.counters.led += 1
            return await fill()
        finally:
            try:
                await self.release(key, token)
            except _STORE_ERRORS as exc:
                # It expires within wait_s: followers then fill for themselves.
                log.warning("fill lease of %s not released: %s", key, exc)

    async def _unreachable(
        self, key: str, fill: Callable[[], Awaitable[T]], exc: BaseException
    ) -> T:
        self.counters.unreachable += 1
        log.info("PoP store unreachable for the fill lease of %s, filling here: %s", key, exc)
        return await fill()
