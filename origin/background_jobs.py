"""Jobs that run beside an origin app for its lifetime, each entered into the lifespan's
exit stack: ``background`` (told to stop at exit, awaited a few seconds, then cancelled)
and ``cancelled_at_exit`` (told to stop and cancelled at once, for a reader blocked on
Redis)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

log = logging.getLogger(__name__)


@asynccontextmanager
async def background(
    job: Callable[[asyncio.Event], Coroutine[Any, Any, None]],
) -> AsyncIterator[None]:
    """``job`` running beside the app until it stops: told to stop, then awaited (a few
    seconds at most), then cancelled."""
    stop = asyncio.Event()
    task = asyncio.create_task(job(stop))
    try:
        yield
    finally:
        stop.set()
        try:
            await asyncio.wait_for(task, timeout=5)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
        except Exception:
            log.exception("background job failed")


@asynccontextmanager
async def cancelled_at_exit(
    job: Callable[[asyncio.Event], Coroutine[Any, Any, None]],
) -> AsyncIterator[None]:
    """``job`` beside the app until it stops, then told to stop and cancelled at once: for
    a reader that blocks on Redis (up to a second) and finishes what it holds when
    cancelled (the sync subscriber), which ``background`` would wait for. Told first as
    well: a cancellation is never lost in redis-py's send any more
    (``redis_client.connections``), but the stop is what a job's own loop checks."""
    stop = asyncio.Event()
    task = asyncio.create_task(job(stop))
    try:
        yield
    finally:
        stop.set()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
