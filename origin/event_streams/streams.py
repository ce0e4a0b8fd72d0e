"""The ``events:{p}`` and ``decisions:{p}`` streams as the workers use them: consumer
groups, the oldest entry a group still needs (the floor under the logs' retention,
``origin.worker.retention``), and how far a group trails the newest entry."""

from __future__ import annotations

from dataclasses import dataclass

from redis.exceptions import ResponseError

from protocol import keys
from redis_client.client import RedisClient

# XREADGROUP's reply (RESP2, bytes): [(stream, [(entry_id, fields or None), ...]), ...]
StreamReply = list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes] | None]]]] | None


@dataclass(frozen=True, slots=True)
class StreamEntry:
    """One entry a worker read: its stream, its id and its payload field."""

    stream: str
    entry_id: bytes
    raw: bytes | None  # None: a pending entry since deleted from the stream

    @property
    def key(self) -> tuple[str, bytes]:
        """The entry among all streams' (an id alone is only unique in its stream)."""
        return self.stream, self.entry_id


async def ensure_groups(redis: RedisClient, partitions: int) -> None:
    """Create the consumer group on every partition of the events and the decisions, from
    the start of each stream, so that what was appended before any worker ran is still
    delivered."""
    for partition in range(partitions):
        await ensure_partition_groups(redis, partition)


async def ensure_partition_groups(redis: RedisClient, partition: int) -> None:
    """``ensure_groups`` for one partition's two streams."""
    for stream in (keys.events_stream(partition), keys.decisions_stream(partition)):
        try:
            await redis.xgroup_create(stream, keys.WORKER_GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise


def stream_id(raw: bytes | str) -> tuple[int, int]:
    text = raw.decode() if isinstance(raw, bytes) else raw
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


# The largest sequence number of an entry id (a 64-bit unsigned integer).
MAX_SEQ = 2**64 - 1


def needed_from(last_delivered: bytes | str, oldest_pending: bytes | str | None) -> tuple[int, int]:
    """The oldest id a group still needs: its oldest pending entry, else (none pending, or
    all acknowledged since the group was read) the id just after the last one delivered:
    everything up to that one is applied."""
    delivered = stream_id(last_delivered)
    if oldest_pending is None:
        ms, seq = delivered
        return (ms, seq + 1) if seq < MAX_SEQ else (ms + 1, 0)
    return min(delivered, stream_id(oldest_pending))


async def consumer_lag_ms(redis: RedisClient, stream: str) -> int:
    """How far the workers' group's deliveries trail the newest entry, in milliseconds of
    stream time (0 when caught up)."""
    try:
        info = await redis.xinfo_stream(stream)
    except ResponseError:  # no such stream yet
        return 0
    newest = stream_id(info["last-generated-id"])
    for group in await redis.xinfo_groups(stream):
        if group["name"] in (keys.WORKER_GROUP, keys.WORKER_GROUP.encode()):
            delivered = stream_id(group["last-delivered-id"])
            return max(0, newest[0] - delivered[0])
    return 0
