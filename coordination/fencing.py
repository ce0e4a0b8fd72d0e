"""Stores that refuse a lock holder older than one they have already seen.

A holder paused past its lease (a GC pause, a stalled VM) still believes it holds the lock
when it wakes (Kleppmann, "How to do distributed locking"). Its lease's fencing token is
lower than the next holder's, so a store that remembers the highest token presented to it
refuses the late holder, whatever the holder believes.

Writes alone are not enough for a read-modify-write: a holder that read, then lapsed, could
still write before the next holder's first write, and the next holder, having read the same
old value, would overwrite it (a lost update). So a fenced read registers its token too:
once the next holder has read, the old holder's write is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from coordination.exceptions import StaleFencingToken


@dataclass(frozen=True, slots=True)
class FencedValue:
    """The pointer's value and the fencing token of the write that stored it."""

    value: bytes
    fencing: int


class FencedPointer:
    """A value at ``key`` (a hash: ``value``, ``fencing`` of its write, ``seen`` the highest
    token presented), accessed only under a token at least as high as ``seen``. Equal tokens
    pass: one holder may read and write several times under one lease."""

    # KEYS[1] pointer hash; ARGV[1] value, ARGV[2] fencing token.
    # Returns 1 if written, 0 if refused as stale.
    WRITE = """
local seen = tonumber(redis.call('HGET', KEYS[1], 'seen') or '-1')
if tonumber(ARGV[2]) < seen then
    return 0
end
redis.call('HSET', KEYS[1], 'value', ARGV[1], 'fencing', ARGV[2], 'seen', ARGV[2])
return 1
"""

    # KEYS[1] pointer hash; ARGV[1] fencing token.
    # Returns {1, value or false, fencing or false}, or {0} if the token is stale.
    READ_AS = """
local seen = tonumber(redis.call('HGET', KEYS[1], 'seen') or '-1')
if tonumber(ARGV[1]) < seen then
    return {0}
end
redis.call('HSET', KEYS[1], 'seen', ARGV[1])
local got = redis.call('HMGET', KEYS[1], 'value', 'fencing')
return {1, got[1], got[2]}
"""

    def __init__(self, redis: Redis, key: str) -> None:
        self._redis = redis
        self.key = key
        self._write = redis.register_script(self.WRITE)
        self._read_as = redis.register_script(self.READ_AS)

    async def write(self, value: bytes | str | int, fencing: int) -> bool:
        """Store ``value`` unless a higher fencing token was presented before."""
        written = await self._write(keys=[self.key], args=[value, fencing])
        return bool(written)

    async def read(self) -> FencedValue | None:
        """The current value, for anyone (no token registered)."""
        value, fencing = await self._redis.hmget(self.key, ["value", "fencing"])
        return _value(value, fencing)

    async def read_as(self, fencing: int) -> FencedValue | None:
        """The current value, read by the holder of ``fencing``, which from now on refuses
        lower tokens; raises ``StaleFencingToken`` if a higher one was presented before."""
        reply = await self._read_as(keys=[self.key], args=[fencing])
        if not reply[0]:
            raise StaleFencingToken(self.key, fencing)
        return _value(reply[1], reply[2])


def _value(value: bytes | str | None, fencing: bytes | str | int | None) -> FencedValue | None:
    if value is None or fencing is None:
        return None
    raw = value.encode() if isinstance(value, str) else value
    return FencedValue(raw, int(fencing))
