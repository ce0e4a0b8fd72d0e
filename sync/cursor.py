"""Where an edge is in its region's sync stream, and where it keeps that.

The cursor holds two things: the id of the last entry the edge went past (applied, or
skipped as malformed) and the sequence of the last message it applied. The id is where
reading resumes; the sequence is what the next entry must follow (``sync.gaps``), so that
a restarted edge checks continuity exactly, even when the entry at its cursor has since
been trimmed away.

Keep the cursor where the edge keeps its entries: a cursor lost while the entries survive
would make the edge start afresh (from the newest entry, no gap) over a full cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from redis_client.client import RedisClient
from sync.exceptions import MalformedMessage
from sync.gaps import parse_id


@dataclass(frozen=True, slots=True)
class Cursor:
    entry_id: str  # "0-0": before the stream's first entry
    seq: int | None  # None: not known (the entry at entry_id was no sync message)


def format_cursor(cursor: Cursor) -> str:
    """``"1767225600000-0 42"``, or the id alone when the sequence is not known."""
    return cursor.entry_id if cursor.seq is None else f"{cursor.entry_id} {cursor.seq}"


def parse_cursor(text: str) -> Cursor:
    entry_id, _, seq = text.partition(" ")
    try:
        parse_id(entry_id)
    except ValueError as exc:
        raise MalformedMessage(f"cursor {text!r}: {exc}") from exc
    if seq and not (seq.isascii() and seq.isdigit()):
        raise MalformedMessage(f"cursor {text!r}: sequence {seq!r} is not a number")
    return Cursor(entry_id, int(seq) if seq else None)


class CursorStore(Protocol):
    async def load(self) -> Cursor | None:
        """The saved cursor; None if there is none; MalformedMessage if it is unreadable."""
        ...

    async def save(self, cursor: Cursor) -> None: ...


class MemoryCursor:
    """A cursor that lives as long as the process (an edge whose entries are in memory)."""

    def __init__(self, cursor: Cursor | None = None) -> None:
        self.cursor = cursor

    async def load(self) -> Cursor | None:
        return self.cursor

    async def save(self, cursor: Cursor) -> None:
        self.cursor = cursor


class RedisCursor:
    """A cursor in one Redis string (``protocol.keys.edge_sync_cursor(edge)``)."""

    def __init__(self, redis: RedisClient, key: str) -> None:
        self._redis = redis
        self.key = key

    async def load(self) -> Cursor | None:
        raw = await self._redis.get(self.key)
        if raw is None:
            return None
        try:
            text = raw.decode("ascii") if isinstance(raw, bytes) else str(raw)
        except UnicodeDecodeError as exc:
            raise MalformedMessage(f"cursor {raw!r} is not ASCII") from exc
        return parse_cursor(text)

    async def save(self, cursor: Cursor) -> None:
        await self._redis.set(self.key, format_cursor(cursor))
