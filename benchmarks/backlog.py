"""What a running stack's stream workers still have to do, read from its Redis: entries of
the event and decision streams not yet delivered or acknowledged, and decisions whose
reward window has not been closed. Benchmarks wait on it before they read what the stack
learnt (``benchmarks.faults``) or freeze it (``benchmarks.perso_policy``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from protocol import keys
from redis_client.client import RedisClient

POLL_S = 0.5


async def drained(redis: RedisClient, streams: Sequence[str]) -> bool:
    """Every entry of ``streams`` delivered to every group and acknowledged (a stream
    not created yet has nothing left)."""
    for stream in streams:
        if not await redis.exists(stream):
            continue
        info = await redis.xinfo_stream(stream)
        for group in await redis.xinfo_groups(stream):
            if group["pending"] or group["last-delivered-id"] != info["last-generated-id"]:
                return False
    return True


async def settled(redis: RedisClient, partitions: int) -> bool:
    """Nothing left for the workers: both kinds of stream drained and no decision's join
    still open (its reward window running, or closed by nobody yet)."""
    streams = [*keys.events_streams(partitions), *keys.decisions_streams(partitions)]
    if not await drained(redis, streams):
        return False
    for partition in range(partitions):
        if await redis.zcard(keys.decisions_due(partition)):
            return False
    return True


async def wait_settled(redis: RedisClient, partitions: int, timeout_s: float) -> bool:
    """Poll ``settled`` until it holds (True) or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while not await settled(redis, partitions):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(POLL_S)
    return True
