"""``perso workers``: the streams and the stream workers as Redis sees them: per partition
its length, pending entries and lag; per running worker the figures of its process (from
0 at each restart); per consumer name the totals of all its runs, and their sum, which
survive restarts (``origin.worker.totals``)."""

from __future__ import annotations

from dataclasses import dataclass

from redis.exceptions import ResponseError

from origin.event_streams.streams import consumer_lag_ms
from origin.worker.totals import TOTALLED, all_workers
from perso.console import table
from protocol import keys
from redis_client.client import RedisClient

LIVE_HEADING = (
    "per worker process, since it started (from 0 after a restart; gone 60 s after it stops)"
)
TOTALS_HEADING = (
    "totals since the streams were created (every run of each consumer name, kept across restarts)"
)
ALL_WORKERS = "all workers"


@dataclass(frozen=True)
class PartitionStatus:
    stream: str
    length: int
    accepted: int
    pending: int
    lag_ms: int


async def partitions(redis: RedisClient, count: int) -> list[PartitionStatus]:
    out = []
    for p in range(count):
        stream = keys.events_stream(p)
        pending = 0
        try:
            for group in await redis.xinfo_groups(stream):
                pending += int(group["pending"])
        except ResponseError:  # no stream yet
            pass
        accepted = await redis.get(keys.events_accepted(p))
        out.append(
            PartitionStatus(
                stream,
                int(await redis.xlen(stream)),
                int(accepted or 0),
                pending,
                await consumer_lag_ms(redis, stream),
            )
        )
    return out


async def _hashes(redis: RedisClient, pattern: str) -> dict[str, dict[str, str]]:
    """Consumer name -> the fields of its worker key matching ``pattern``, by name."""
    found: dict[str, dict[str, str]] = {}
    async for key in redis.scan_iter(match=pattern, count=1000):
        fields = await redis.hgetall(key)
        found[keys.consumer_of(_text(key))] = {_text(k): _text(v) for k, v in fields.items()}
    return dict(sorted(found.items()))


async def workers(redis: RedisClient) -> dict[str, dict[str, str]]:
    """The figures of every worker process that reported in the last 60 s."""
    return await _hashes(redis, keys.WORKER_STATS_PATTERN)


async def totals(redis: RedisClient) -> dict[str, dict[str, int]]:
    """The totals of every consumer name that ever published."""
    found = await _hashes(redis, keys.WORKER_TOTALS_PATTERN)
    return {name: {c: int(v) for c, v in fields.items()} for name, fields in found.items()}


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def report(redis: RedisClient, partition_count: int) -> str:
    rows = [
        [p.stream, f"{p.accepted:,}", f"{p.length:,}", f"{p.pending:,}", f"{p.lag_ms:,}"]
        for p in await partitions(redis, partition_count)
    ]
    sections = [table(["stream", "accepted", "in stream", "pending", "lag ms"], rows)]
    columns = ["applied", "duplicates", "conflicts", "reclaimed", "deferred", "mean_batch"]
    columns += ["lag_ms", "freshness_p50_ms", "freshness_p99_ms", "trimmer"]
    found = await workers(redis)
    if found:
        live = [[name, *(stats.get(c, "-") for c in columns)] for name, stats in found.items()]
        sections.append(LIVE_HEADING + "\n" + table(["worker", *columns], live))
    else:
        sections.append("no worker has reported in the last 60 s")
    summed = await totals(redis)
    if summed:
        rows = [[name, *(f"{t.get(c, 0):,}" for c in TOTALLED)] for name, t in summed.items()]
        rows.append([ALL_WORKERS, *(f"{n:,}" for n in all_workers(summed).values())])
        sections.append(TOTALS_HEADING + "\n" + table(["consumer", *TOTALLED], rows))
    return "\n\n".join(sections)
