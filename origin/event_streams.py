"""The ``events:{p}`` streams as the workers use them: consumer groups, trimming what
every group has acknowledged, and how far a group trails the newest entry."""

from __future__ import annotations

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from protocol import keys

# XREADGROUP's reply (RESP2, bytes): [(stream, [(entry_id, fields or None), ...]), ...]
StreamReply = list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes] | None]]]] | None


async def ensure_groups(redis: Redis, partitions: int) -> None:
    """Create the consumer group on every partition, from the start of the stream, so that
    events appended before any worker ran are still delivered."""
    for stream in keys.events_streams(partitions):
        try:
            await redis.xgroup_create(stream, keys.EMBEDDER_GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise


def stream_id(raw: bytes | str) -> tuple[int, int]:
    text = raw.decode() if isinstance(raw, bytes) else raw
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


async def trim_acknowledged(redis: Redis, stream: str) -> int:
    """Trim ``stream`` below the oldest entry some consumer group still needs: the first
    pending entry, or the last one delivered. Everything below was acknowledged by every
    group, so nothing unacknowledged is ever trimmed. Returns the entries removed."""
    floor: tuple[int, int] | None = None
    for group in await redis.xinfo_groups(stream):
        needed = stream_id(group["last-delivered-id"])
        if group["pending"]:
            summary = await redis.xpending(stream, group["name"])
            needed = min(needed, stream_id(summary["min"]))
        floor = needed if floor is None else min(floor, needed)
    if floor is None or floor == (0, 0):
        return 0
    return int(await redis.xtrim(stream, minid=f"{floor[0]}-{floor[1]}", approximate=False))


async def consumer_lag_ms(redis: Redis, stream: str) -> int:
    """How far the embedder group's deliveries trail the newest entry, in milliseconds of
    stream time (0 when caught up)."""
    try:
        info = await redis.xinfo_stream(stream)
    except ResponseError:  # no such stream yet
        return 0
    newest = stream_id(info["last-generated-id"])
    for group in await redis.xinfo_groups(stream):
        if group["name"] in (keys.EMBEDDER_GROUP, keys.EMBEDDER_GROUP.encode()):
            delivered = stream_id(group["last-delivered-id"])
            return max(0, newest[0] - delivered[0])
    return 0
