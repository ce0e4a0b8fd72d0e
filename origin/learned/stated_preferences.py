"""Users' stated category preferences as they are kept in Redis: ``u:{id}:pref``, a hash
under the user's tag: ``c:<category>`` -> signed strength in [-1, 1] (positive: more of
it, negative: less), plus the ``fencing`` token of the last write and the highest token
``seen`` (``coordination.fencing``). The fencing token of the last write is the
preferences' version: it only grows, so whoever holds a copy (an edge) can tell a newer
one from an older one.

Changing them (under the user's lock) and what they do to a ranking is
``origin.ranking.preferences``'s; reading them is everyone's: a personalize request, the
user-state route, the stream workers that send them to the edges with each new model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from coordination.fencing import FENCING
from protocol import keys
from redis_client.client import RedisClient, RedisPipeline

# Category name -> signed strength in [-1, 1], never 0.
Strengths = Mapping[str, float]
Fields = Mapping[bytes, bytes] | Mapping[bytes | str, bytes | str]

_CATEGORY_PREFIX = "c:"


def encode(strengths: Strengths) -> dict[str, str]:
    """The hash's fields of the categories."""
    return {_CATEGORY_PREFIX + c: repr(float(strength)) for c, strength in strengths.items()}


def decode(fields: Fields) -> dict[str, float]:
    """Strengths from the stored hash; a damaged value is skipped, not fatal (the ranking
    of every later request of the user reads it)."""
    out: dict[str, float] = {}
    for raw_name, value in fields.items():
        try:
            name = raw_name.decode() if isinstance(raw_name, bytes) else raw_name
            strength = float(value)
        except (ValueError, UnicodeDecodeError):
            continue
        if name.startswith(_CATEGORY_PREFIX) and -1.0 <= strength <= 1.0 and strength != 0:
            out[name.removeprefix(_CATEGORY_PREFIX)] = strength
    return out


def version_of(fields: Fields) -> int:
    """The preferences' version: the fencing token of the write that stored them, which
    only grows (0: never written, or unreadable)."""
    held: Mapping[Any, Any] = fields
    raw = held.get(FENCING.encode(), held.get(FENCING))
    try:
        version = int(raw) if raw is not None else 0
    except (TypeError, ValueError):
        return 0
    return max(version, 0)


def queue_read(pipe: RedisPipeline, user_id: str) -> None:
    """Queue the read whose reply ``decode`` takes (for the personalize round trip)."""
    pipe.hgetall(keys.user_preferences(user_id))


async def read_many(
    redis: RedisClient, user_ids: Sequence[str]
) -> dict[str, tuple[Strengths, int]]:
    """Each user's preferences and their version, in one round trip (the stream workers
    send them to the edges with each user's new model)."""
    async with redis.pipeline(transaction=False) as pipe:
        for user_id in user_ids:
            queue_read(pipe, user_id)
        replies: list[Any] = await pipe.execute()
    return {
        user_id: (decode(fields), version_of(fields))
        for user_id, fields in zip(user_ids, replies, strict=True)
    }
