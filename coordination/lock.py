"""The lock interface every backend implements, and what is built on it alone.

A ``Lease`` is proof of holding a resource until ``ttl_ms`` after the grant, unless extended.
Its ``fencing`` token increases with every grant of the resource: a store that remembers the
highest token it has seen can refuse a holder whose lease expired while it was paused
(``coordination.fencing``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, ParamSpec, Protocol, TypeVar, runtime_checkable

from coordination.exceptions import LockNotAcquired
from coordination.retry import AGGRESSIVE, DEFAULT, NO_RETRY, RetryPolicy, delays

# The retry presets are re-exported: callers import them with the interface.
__all__ = [
    "AGGRESSIVE",
    "DEFAULT",
    "NO_RETRY",
    "Evicts",
    "Lease",
    "Lock",
    "LockInfo",
    "LockNotAcquired",
    "RetryPolicy",
    "acquire_with_retry",
    "locked",
    "with_lock",
]

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Lease:
    """A granted lock: ``token`` proves ownership, ``fencing`` orders grants of ``resource``."""

    resource: str
    token: str
    fencing: int
    acquired_at: float  # the lock's clock, seconds
    ttl_ms: int

    @property
    def expires_at(self) -> float:
        """When the lease lapses unless extended, on the lock's clock (a local estimate)."""
        return self.acquired_at + self.ttl_ms / 1000


@dataclass(frozen=True, slots=True)
class LockInfo:
    """Who holds a resource now: the holder's token and fencing token, the TTL left."""

    resource: str
    token: str
    fencing: int
    remaining_ms: int


class Lock(Protocol):
    """A lock on named resources, whatever the backend: acquire, release, extend, inspect."""

    async def acquire(self, resource: str, ttl_ms: int, *, retry: RetryPolicy = ...) -> Lease:
        """Grant ``resource``, retrying under ``retry``; raises ``LockNotAcquired``."""
        ...

    async def try_acquire(self, resource: str, ttl_ms: int) -> Lease | None:
        """One attempt: the lease, or None when the resource is held."""
        ...

    async def release(self, lease: Lease) -> bool:
        """Release if ``lease`` still holds the resource; False when it had lapsed."""
        ...

    async def is_locked(self, resource: str) -> bool:
        """Whether a lease holds ``resource`` now: a snapshot for status views, not a way to
        claim it (only a grant excludes others)."""
        ...

    async def extend(self, lease: Lease, ttl_ms: int) -> bool:
        """Reset the lease's TTL to ``ttl_ms`` if it still holds; False when it was lost."""
        ...

    async def info(self, resource: str) -> LockInfo | None:
        """The current holder, or None when the resource is free."""
        ...


@runtime_checkable
class Evicts(Protocol):
    """A backend whose holders cannot be released by token from anywhere (PostgreSQL: the
    lock belongs to the holder's session) offers this for an operator's force release."""

    async def evict(self, resource: str, token: str) -> bool:
        """Free ``resource`` from the lease ``token``, wherever it is held."""
        ...


async def acquire_with_retry(
    try_acquire: Callable[[str, int], Awaitable[Lease | None]],
    resource: str,
    ttl_ms: int,
    retry: RetryPolicy,
    *,
    rng: Callable[[], float],
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Lease:
    """The retry loop of every backend's ``acquire``: one ``try_acquire`` per attempt, the
    policy's jittered waits between them."""
    waits = delays(retry, rng)
    for wait in waits:
        lease = await try_acquire(resource, ttl_ms)
        if lease is not None:
            return lease
        await sleep(wait)
    lease = await try_acquire(resource, ttl_ms)
    if lease is None:
        raise LockNotAcquired(resource, retry.attempts)
    return lease


@asynccontextmanager
async def locked(
    lock: Lock, resource: str, ttl_ms: int, *, retry: RetryPolicy = DEFAULT
) -> AsyncIterator[Lease]:
    """Hold ``resource`` for the body of an ``async with``; released however the body ends."""
    lease = await lock.acquire(resource, ttl_ms, retry=retry)
    try:
        yield lease
    finally:
        await lock.release(lease)


def with_lock(
    lock: Lock, resource: str, ttl_ms: int, *, retry: RetryPolicy = DEFAULT
) -> Callable[[Callable[P, Coroutine[Any, Any, R]]], Callable[P, Coroutine[Any, Any, R]]]:
    """Decorate a coroutine function so that each call runs holding ``resource``."""

    def decorate(
        func: Callable[P, Coroutine[Any, Any, R]],
    ) -> Callable[P, Coroutine[Any, Any, R]]:
        @functools.wraps(func)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            async with locked(lock, resource, ttl_ms, retry=retry):
                return await func(*args, **kwargs)

        return wrapper

    return decorate
