"""Request coalescing: one origin fetch per key at a time within one edge process.

The first caller for a key (the leader) starts the fetch; callers arriving while it runs
(followers) wait for its result, bounded by ``wait_s``, after which each runs a fetch of
its own rather than wait on longer (a hung leader must not hold every request of a key).
The leader's failure is every waiting follower's failure: the origin just failed them.

The fetch runs as a task of its own. A follower that is cancelled (its client went away)
stops waiting and nothing else; so does a cancelled leader, while the fetch goes on for
the followers, and for the cache it fills. The key is free again once the fetch is over,
successful or not: the next caller leads a new one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Coalescer(Generic[T]):
    """Single flight per key. ``leaders``, ``followers`` and ``timeouts`` count callers
    (for metrics): a follower that gave up waiting counts as a follower and a timeout."""

    def __init__(self) -> None:
        self._inflight: dict[str, asyncio.Task[T]] = {}
        self.leaders = 0
        self.followers = 0
        self.timeouts = 0

    def __len__(self) -> int:
        """How many keys have a fetch in flight."""
        return len(self._inflight)

    async def run(
        self, key: str, fetch: Callable[[], Awaitable[T]], *, wait_s: float
    ) -> tuple[T, bool]:
        """``fetch()``'s result for ``key``, shared with concurrent callers of the same
        key, and whether this caller led (ran the shared fetch)."""
        task = self._inflight.get(key)
        if task is None or task.done():
            task = asyncio.get_running_loop().create_task(_call(fetch))
            self._inflight[key] = task
            task.add_done_callback(lambda done: self._finished(key, done))
            self.leaders += 1
            # shield: cancelling this caller must not cancel the followers' fetch.
            return await asyncio.shield(task), True
        self.followers += 1
        try:
            return await asyncio.wait_for(asyncio.shield(task), wait_s), False
        except TimeoutError:
            self.timeouts += 1
        return await fetch(), False

    def _finished(self, key: str, task: asyncio.Task[T]) -> None:
        # A failure every caller stopped waiting for is not logged as never retrieved:
        # each cancelled shield marks it retrieved.
        if self._inflight.get(key) is task:
            del self._inflight[key]


async def _call(fetch: Callable[[], Awaitable[T]]) -> T:
    return await fetch()
