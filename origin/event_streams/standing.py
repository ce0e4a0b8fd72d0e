"""What the stream workers stand at now, read from Redis for the origin's ``/metrics``:
workers have no HTTP server of their own, and the operations page reads ``/metrics`` only.

Per partition the backlog (entries not yet delivered to the group, plus delivered and not
acknowledged); per consumer name the entries read over all its runs
(``origin.worker.totals``: a counter that survives restarts, so a rate can be taken of
it) and, while its process runs, its freshness p99 (``origin.worker.figures``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from redis.exceptions import ResponseError

from protocol import keys
from redis_client.client import RedisClient


@dataclass(frozen=True)
class Standing:
    backlog: dict[int, int] = field(default_factory=dict)  # partition -> entries
    entries: dict[str, int] = field(default_factory=dict)  # consumer -> read, all runs
    freshness_p99_ms: dict[str, float] = field(default_factory=dict)  # running consumers


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def backlog(redis: RedisClient, partition: int) -> int:
    """Entries of the partition the workers' group has yet to finish."""
    try:
        groups = await redis.xinfo_groups(keys.events_stream(partition))
    except ResponseError:  # no stream yet
        return 0
    for group in groups:
        if _text(group["name"]) == keys.WORKER_GROUP:
            return int(group.get("pending") or 0) + int(group.get("lag") or 0)
    return 0


async def standing(redis: RedisClient, partitions: int) -> Standing:
    found = Standing()
    for p in range(partitions):
        found.backlog[p] = await backlog(redis, p)
    async for key in redis.scan_iter(match=keys.WORKER_TOTALS_PATTERN, count=1000):
        entries = await redis.hget(key, "entries")
        found.entries[keys.consumer_of(_text(key))] = int(entries or 0)
    async for key in redis.scan_iter(match=keys.WORKER_STATS_PATTERN, count=1000):
        p99 = await redis.hget(key, "freshness_p99_ms")
        if p99 is not None:
            found.freshness_p99_ms[keys.consumer_of(_text(key))] = float(p99)
    return found
