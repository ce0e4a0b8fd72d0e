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

from collections.abc import Mapping
from dataclasses import dataclass

from coordination.exceptions import StaleFencingToken
from redis_client.client import RedisClient

# The bookkeeping fields of a fenced hash, beside its own fields.
FENCING = "fencing"  # the token of the write that stored the fields
SEEN = "seen"  # the highest token presented, by a read or a write
_BOOKKEEPING = frozenset({FENCING.encode(), SEEN.encode()})


class FencedHashes:
    """Hashes whose fields are replaced whole, and read by a lock holder, only under a
    fencing token at least as high as the highest presented before (the hash's ``seen``).
    Equal tokens pass: one holder may read and write several times under one lease. Any
    key may be used; each call touches that key alone (one slot)."""

    # KEYS[1] the hash; ARGV[1] fencing token.
    # Returns {1, field, value, ...} (the whole hash, bookkeeping included), or {0} if a
    # higher token was seen; from now on tokens below ARGV[1] are refused.
    READ_AS = """
local seen = tonumber(redis.call('HGET', KEYS[1], 'seen') or '-1')
if tonumber(ARGV[1]) < seen then
    return {0}
end
redis.call('HSET', KEYS[1], 'seen', ARGV[1])
local out = redis.call('HGETALL', KEYS[1])
table.insert(out, 1, 1)
return out
"""

    # KEYS[1] the hash; ARGV[1] fencing token, ARGV[2..] field, value pairs (the complete
    # new set). Returns 1 if written, 0 if refused as stale. The hash is replaced whole, so
    # a field left out goes with the same write.
    REPLACE = """
local seen = tonumber(redis.call('HGET', KEYS[1], 'seen') or '-1')
if tonumber(ARGV[1]) < seen then
    return 0
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'fencing', ARGV[1], 'seen', ARGV[1], unpack(ARGV, 2))
return 1
"""

    def __init__(self, redis: RedisClient) -> None:
        self._redis = redis
        self._read_as = redis.register_script(self.READ_AS)
        self._replace = redis.register_script(self.REPLACE)

    async def read(self, key: str) -> tuple[dict[bytes, bytes], int | None]:
        """The hash's own fields and the token of their write, for anyone (no token
        registered)."""
        raw = await self._redis.hgetall(key)
        return _split({_bytes(name): _bytes(value) for name, value in raw.items()})

    async def read_as(self, key: str, fencing: int) -> tuple[dict[bytes, bytes], int | None]:
        """The hash's own fields and the token of their write (None: never written), read
        by the holder of ``fencing``; raises ``StaleFencingToken`` if a higher token was
        presented before."""
        reply = await self._read_as(keys=[key], args=[fencing])
        if not reply[0]:
            raise StaleFencingToken(key, fencing)
        flat = [_bytes(part) for part in reply[1:]]
        return _split(dict(zip(flat[::2], flat[1::2], strict=True)))

    async def replace(
        self, key: str, fields: Mapping[str, bytes | str | int | float], fencing: int
    ) -> None:
        """Replace the hash's fields by ``fields``; raises ``StaleFencingToken`` (nothing
        written) if a higher token was presented before."""
        args: list[bytes | str | int | float] = [fencing]
        for name, value in fields.items():
            args += [name, value]
        if not await self._replace(keys=[key], args=args):
            raise StaleFencingToken(key, fencing)


@dataclass(frozen=True, slots=True)
class FencedValue:
    """The pointer's value and the fencing token of the write that stored it."""

    value: bytes
    fencing: int


class FencedPointer:
    """One value at ``key``, a fenced hash (``FencedHashes``) with the one field ``value``."""

    def __init__(self, redis: RedisClient, key: str) -> None:
        self.key = key
        self._hashes = FencedHashes(redis)

    async def write(self, value: bytes | str | int, fencing: int) -> bool:
        """Store ``value`` unless a higher fencing token was presented before."""
        try:
            await self._hashes.replace(self.key, {_VALUE: value}, fencing)
        except StaleFencingToken:
            return False
        return True

    async def read(self) -> FencedValue | None:
        """The current value, for anyone (no token registered)."""
        return _pointed(*await self._hashes.read(self.key))

    async def read_as(self, fencing: int) -> FencedValue | None:
        """The current value, read by the holder of ``fencing``, which from now on refuses
        lower tokens; raises ``StaleFencingToken`` if a higher one was presented before."""
        return _pointed(*await self._hashes.read_as(self.key, fencing))


_VALUE = "value"


def _pointed(fields: Mapping[bytes, bytes], written: int | None) -> FencedValue | None:
    value = fields.get(_VALUE.encode())
    return None if value is None or written is None else FencedValue(value, written)


def _bytes(part: bytes | str | int) -> bytes:
    return part if isinstance(part, bytes) else str(part).encode()


def _split(fields: Mapping[bytes, bytes]) -> tuple[dict[bytes, bytes], int | None]:
    """The hash's own fields, and the token of their write (None: never written)."""
    written = fields.get(FENCING.encode())
    own = {name: value for name, value in fields.items() if name not in _BOOKKEEPING}
    return own, int(written) if written is not None else None
