"""Stores that refuse writes from a lock holder older than one they have already seen.

A holder paused past its lease (a GC pause, a stalled VM) still believes it holds the lock
when it wakes (Kleppmann, "How to do distributed locking"). Its lease's fencing token is
lower than the next holder's, so a store that keeps the highest token it accepted refuses
the late write, whatever the holder believes.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis


@dataclass(frozen=True, slots=True)
class FencedValue:
    """The pointer's value and the fencing token of the write that stored it."""

    value: bytes
    fencing: int


class FencedPointer:
    """A value at ``key`` (a hash: ``value``, ``fencing``) written only under a fencing token
    at least as high as the last accepted one. Equal tokens pass: one holder may write
    several times under one lease."""

    # KEYS[1] pointer hash; ARGV[1] value, ARGV[2] fencing token.
    # Returns 1 if written, 0 if refused as stale.
    WRITE = """
local seen = tonumber(redis.call('HGET', KEYS[1], 'fencing') or '-1')
if tonumber(ARGV[2]) < seen then
    return 0
end
redis.call('HSET', KEYS[1], 'value', ARGV[1], 'fencing', ARGV[2])
return 1
"""

    def __init__(self, redis: Redis, key: str) -> None:
        self._redis = redis
        self._key = key
        self._write = redis.register_script(self.WRITE)

    async def write(self, value: bytes | str | int, fencing: int) -> bool:
        """Store ``value`` unless a write with a higher fencing token was accepted before."""
        written = await self._write(keys=[self._key], args=[value, fencing])
        return bool(written)

    async def read(self) -> FencedValue | None:
        value, fencing = await self._redis.hmget(self._key, ["value", "fencing"])
        if value is None or fencing is None:
            return None
        raw = value.encode() if isinstance(value, str) else value
        return FencedValue(raw, int(fencing))
