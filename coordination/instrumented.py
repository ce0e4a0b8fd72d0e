"""Any lock backend, measured: acquire latency, contention, lost leases, held resources.

``InstrumentedLock`` wraps a ``Lock`` and keeps plain counters (``LockStats``) that a
Prometheus collector reads at scrape time. It also remembers the leases this process holds,
so an admin endpoint can say which resources this process is in the middle of.

What counts as what:

- contention: a ``try_acquire`` that found the resource held (each retry of an
  ``acquire`` is one), and ``acquire`` calls that gave up (``LockNotAcquired``);
- lost lease: a ``release`` or ``extend`` refused because the lease had lapsed or been
  taken over; a holder whose heartbeat signalled ``lost`` reports it with ``lost``;
- acquire latency: from the call to the grant, retries included, per ``acquire``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from coordination.exceptions import LockNotAcquired
from coordination.lock import (
    DEFAULT,
    Evicts,
    Lease,
    Lock,
    LockInfo,
    RetryPolicy,
    acquire_with_retry,
)
from protocol.histogram import LatencyHistogram


@dataclass
class LockStats:
    """An ``InstrumentedLock``'s plain counters since it was made, and its acquire latency
    histogram (ms); ``lock_metrics`` turns them into Prometheus families at scrape time."""

    grants: int = 0
    contended: int = 0  # attempts that found the resource held
    gave_up: int = 0  # acquires that raised LockNotAcquired
    releases: int = 0
    lost: int = 0  # releases or extensions refused: the lease had lapsed
    extensions: int = 0
    forced_releases: int = 0
    acquire_latency: LatencyHistogram = field(default_factory=LatencyHistogram)


class InstrumentedLock:
    """``lock`` with its figures in ``stats``; a ``Lock`` itself."""

    def __init__(
        self,
        lock: Lock,
        *,
        rng: Callable[[], float],
        perf: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.inner = lock
        self.stats = LockStats()
        self.held: dict[str, Lease] = {}  # resource -> this process's current lease
        self._rng = rng
        self._perf = perf

    async def acquire(self, resource: str, ttl_ms: int, *, retry: RetryPolicy = DEFAULT) -> Lease:
        """Runs the retry loop here over its own ``try_acquire``, so every attempt counts; timed."""
        started = self._perf()
        try:
            lease = await acquire_with_retry(
                self.try_acquire, resource, ttl_ms, retry, rng=self._rng
            )
        except LockNotAcquired:
            self.stats.gave_up += 1
            raise
        self.stats.acquire_latency.observe((self._perf() - started) * 1000)
        return lease

    async def try_acquire(self, resource: str, ttl_ms: int) -> Lease | None:
        """The inner ``try_acquire``; counts a grant (remembered in ``held``) or a contention."""
        lease = await self.inner.try_acquire(resource, ttl_ms)
        if lease is None:
            self.stats.contended += 1
            return None
        self.stats.grants += 1
        self.held[resource] = lease
        return lease

    async def release(self, lease: Lease) -> bool:
        """The inner ``release``; forgets the lease even if it raises; counts a release or loss."""
        try:
            released = await self.inner.release(lease)
        finally:  # unreachable backend or not, this process no longer counts on the lease
            if self.held.get(lease.resource) == lease:
                del self.held[lease.resource]
        if released:
            self.stats.releases += 1
        else:
            self.stats.lost += 1
        return released

    async def is_locked(self, resource: str) -> bool:
        """Passed to the inner lock as is: a query changes no counter."""
        return await self.inner.is_locked(resource)

    async def extend(self, lease: Lease, ttl_ms: int) -> bool:
        """The inner ``extend``; counts an extension, or a lost lease when it is refused."""
        extended = await self.inner.extend(lease, ttl_ms)
        if extended:
            self.stats.extensions += 1
        else:
            self.stats.lost += 1
        return extended

    async def info(self, resource: str) -> LockInfo | None:
        """Passed to the inner lock as is; ``force_release`` reads the holder the same way."""
        return await self.inner.info(resource)

    async def force_release(self, resource: str) -> LockInfo | None:
        """Free ``resource`` whoever holds it (an operator's last resort for a holder that
        died with a long TTL). Returns the evicted holder, or None when it was free. The
        evicted holder's fencing token is now stale for the stores it wrote to."""
        holder = await self.inner.info(resource)
        if holder is None:
            return None
        if isinstance(self.inner, Evicts):
            freed = await self.inner.evict(resource, holder.token)
        else:
            lease = Lease(resource, holder.token, holder.fencing, 0.0, max(1, holder.remaining_ms))
            freed = await self.inner.release(lease)
        if not freed:
            return None  # it lapsed or changed hands meanwhile: nothing forced
        self.stats.forced_releases += 1
        self.held.pop(resource, None)
        return holder
