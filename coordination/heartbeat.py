"""Automatic lease renewal for long holders, and the signal that the lease was lost.

``Heartbeat`` extends a lease every ``every_s`` seconds while its ``async with`` body runs.
When an extension is refused (the lease lapsed, or another holder has the resource) or
cannot be made (the backend is unreachable, so the lease may lapse unseen), it sets
``lost`` and stops: the holder must then stop writing, or write only through a fenced store.
``check`` is what a holder calls before each write: ``LeaseLost`` once ``lost`` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from types import TracebackType

from coordination.exceptions import LeaseLost
from coordination.lock import Lease, Lock


class Heartbeat:
    """Renews ``lease`` to its own TTL every ``every_s`` seconds; ``lost`` is the signal."""

    def __init__(
        self,
        lock: Lock,
        lease: Lease,
        every_s: float,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if not 0 < every_s * 1000 < lease.ttl_ms:
            raise ValueError("renew more often than the lease's TTL")
        self.lease = lease
        self.lost = asyncio.Event()
        self.renewals = 0
        self._lock = lock
        self._every_s = every_s
        self._sleep = sleep
        self._task: asyncio.Task[None] | None = None

    def check(self) -> None:
        """Raises ``LeaseLost`` once the lease was lost: what a holder calls before a write."""
        if self.lost.is_set():
            raise LeaseLost(self.lease.resource)

    async def __aenter__(self) -> Heartbeat:
        self._task = asyncio.create_task(self._run(), name=f"heartbeat:{self.lease.resource}")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await self._sleep(self._every_s)
            try:
                kept = await self._lock.extend(self.lease, self.lease.ttl_ms)
            except Exception:
                # Unreachable backend: the lease may expire without our seeing it.
                kept = False
            if not kept:
                self.lost.set()
                return
            self.renewals += 1
