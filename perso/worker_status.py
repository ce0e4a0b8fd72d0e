"""``perso workers``: the streams and the stream workers as Redis sees them: per partition
its length, pending entries and lag; per worker the figures it publishes."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from origin.event_streams import consumer_lag_ms
from perso.console import table
from protocol import keys


@dataclass(frozen=True)
class PartitionStatus:
    stream: str
    length: int
    accepted: int
    pending: int
    lag_ms: int


async def partitions(redis: Redis, count: int) -> list[PartitionStatus]:
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


async def workers(redis: Redis) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    async for key in redis.scan_iter(match="worker:{*}:stats", count=1000):
        name = key.decode() if isinstance(key, bytes) else str(key)
        fields = await redis.hgetall(key)
        found[name[len("worker:{") : -len("}:stats")]] = {
            _text(k): _text(v) for k, v in fields.items()
        }
    return dict(sorted(found.items()))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def report(redis: Redis, partition_count: int) -> str:
    rows = [
        [p.stream, f"{p.accepted:,}", f"{p.length:,}", f"{p.pending:,}", f"{p.lag_ms:,}"]
        for p in await partitions(redis, partition_count)
    ]
    text = table(["stream", "accepted", "in stream", "pending", "lag ms"], rows)
    columns = ["applied", "duplicates", "conflicts", "reclaimed", "held", "mean_batch"]
    columns += ["lag_ms", "freshness_p50_ms", "freshness_p99_ms", "trimmer"]
    found = await workers(redis)
    if not found:
        return text + "\n\nno worker has reported in the last 60 s"
    worker_rows = [[name, *(stats.get(c, "-") for c in columns)] for name, stats in found.items()]
    return text + "\n\n" + table(["worker", *columns], worker_rows)
