"""The retained log as a recompute reads it (``origin.worker.recompute``): every partition's
events and decisions merged in stream order, each entry with whose it is, what it can
teach them and the items it names; and what the live consumer group had not applied yet,
and whether the log since a moment is all the log ever held.
"""

from __future__ import annotations

import heapq
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

from redis.exceptions import ResponseError

from origin.event_streams.streams import stream_id
from origin.learned.user_models import observation_hash
from origin.worker.join_lessons import closing_id
from protocol import keys
from protocol.actions import ENGAGED_ACTIONS
from protocol.api import Action
from protocol.decisions import DECISION_FIELD, decode_entry
from protocol.events import EVENT_FIELD, decode_event
from protocol.exceptions import MalformedMessage
from redis_client.client import RedisClient

# Entries read from the live log per XRANGE.
READ_CHUNK = 1000


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One entry of the log, decoded as far as the recompute needs: whose it is, what it can
    teach them (observation hashes) and the items it names."""

    at: tuple[int, int]  # its id
    decision: bool  # of decisions:{p}, else of events:{p}
    stream: str
    entry_id: bytes
    fields: dict[bytes, bytes]
    users: dict[str, set[int]]  # user -> observations it can teach them
    items: frozenset[str]
    records: int  # decisions in a decision entry (a batch holds several); an event: 1


def describe(stream: str, decision: bool, entry_id: bytes, fields: dict[bytes, bytes]) -> LogEntry:
    """An entry with its users, observations and items (none when it does not decode: the
    worker parks it, live and here alike)."""
    users: dict[str, set[int]] = {}
    items: set[str] = set()
    records = 1
    try:
        if decision:
            found = decode_entry(fields.get(DECISION_FIELD, b""))
            records = len(found)
            for d in found:
                users.setdefault(d.user_id, set()).add(observation_hash(closing_id(d.request_id)))
                items.update(s.item_id for s in d.shown)
        else:
            e = decode_event(fields.get(EVENT_FIELD, b""))
            taught = users.setdefault(e.user_id, set())
            if e.action in ENGAGED_ACTIONS or e.action == Action.DISMISS:
                taught.add(observation_hash(e.interaction_id))
            items.add(e.item_id)
    except MalformedMessage:
        users, items, records = {}, set(), 0
    return LogEntry(
        stream_id(entry_id), decision, stream, entry_id, fields, users, frozenset(items), records
    )


async def read_stream(
    redis: RedisClient, stream: str, start: str, end: str
) -> AsyncIterator[tuple[bytes, dict[bytes, bytes]]]:
    """The entries of ``stream`` from ``start`` to ``end`` (inclusive ids), in chunks."""
    while True:
        chunk = cast(
            list[tuple[bytes, dict[bytes, bytes]]],
            await redis.xrange(stream, min=start, max=end, count=READ_CHUNK),
        )
        for entry_id, fields in chunk:
            yield entry_id, fields
        if len(chunk) < READ_CHUNK:
            return
        last = chunk[-1][0]
        start = "(" + (last.decode() if isinstance(last, bytes) else str(last))


async def read_log(
    redis: RedisClient, partitions: int, start: str, end: str
) -> AsyncIterator[LogEntry]:
    """Every partition's events and decisions from ``start`` to ``end``, merged by id (at
    equal ids a decision first, as a live batch opens its joins before its feedback)."""
    sources = [
        (stream, decision, read_stream(redis, stream, start, end))
        for p in range(partitions)
        for stream, decision in ((keys.decisions_stream(p), True), (keys.events_stream(p), False))
    ]
    heads: list[tuple[tuple[int, int], int, int, bytes, dict[bytes, bytes]]] = []
    for n, (_, decision, source) in enumerate(sources):
        first = await anext(source, None)
        if first is not None:
            heads.append((stream_id(first[0]), 0 if decision else 1, n, *first))
    heapq.heapify(heads)
    while heads:
        _, _, n, entry_id, fields = heapq.heappop(heads)
        stream, decision, source = sources[n]
        yield describe(stream, decision, entry_id, fields)
        following = await anext(source, None)
        if following is not None:
            heapq.heappush(heads, (stream_id(following[0]), 0 if decision else 1, n, *following))


async def observations_in(
    redis: RedisClient, partitions: int, start: str, end: str
) -> dict[str, set[int]]:
    """Whose entries the log holds between ``start`` and ``end``, with what they can teach
    them."""
    out: dict[str, set[int]] = {}
    async for entry in read_log(redis, partitions, start, end):
        for user, observations in entry.users.items():
            out.setdefault(user, set()).update(observations)
    return out


def near_cut(at_ms: int, decision: bool, cut_ms: int, settle_ms: int, grace_ms: int) -> bool:
    """Whether an entry came so close to the cut that the live workers may have applied it
    (a decision: or the closing of the user's earlier joins it brings, ``grace_ms`` after
    it) on either side of it: they trail by up to ``settle_ms``."""
    return at_ms > cut_ms - settle_ms - (grace_ms if decision else 0)


def closes_unsettled(due_ms: int, cut_ms: int, read_ms: int, settle_ms: int) -> bool:
    """Whether a join due at ``due_ms`` may have closed live but not in the recompute, or the
    other way: after the cut (the recompute stops there) and before the live records were
    read (``read_ms``), give or take ``settle_ms``."""
    return cut_ms - settle_ms < due_ms <= read_ms + settle_ms


async def unapplied(redis: RedisClient, partitions: int) -> set[tuple[str, bytes]]:
    """The entries the live consumer group has not applied yet: pending (read, or held for
    a freshness tier) or not yet delivered (after its last delivered id; those are found by
    id when read)."""
    out: set[tuple[str, bytes]] = set()
    for p in range(partitions):
        for stream in (keys.events_stream(p), keys.decisions_stream(p)):
            start = "-"
            while True:
                try:
                    rows = await redis.xpending_range(
                        stream, keys.WORKER_GROUP, min=start, max="+", count=READ_CHUNK
                    )
                except ResponseError:  # no such stream or group: nothing pending
                    break
                out.update((stream, _bytes(row["message_id"])) for row in rows)
                if len(rows) < READ_CHUNK:
                    break
                start = "(" + _bytes(rows[-1]["message_id"]).decode()
    return out


async def delivered_up_to(redis: RedisClient, partitions: int) -> dict[str, tuple[int, int]]:
    """Each stream's last id delivered to the live consumer group (0-0: none, or no group)."""
    out: dict[str, tuple[int, int]] = {}
    for p in range(partitions):
        for stream in (keys.events_stream(p), keys.decisions_stream(p)):
            out[stream] = (0, 0)
            if not await redis.exists(stream):
                continue
            for group in await redis.xinfo_groups(stream):
                if _bytes(group["name"]) == keys.WORKER_GROUP.encode():
                    out[stream] = stream_id(group["last-delivered-id"])
    return out


async def complete_since(redis: RedisClient, partitions: int, since_ms: int) -> bool:
    """Whether the log since ``since_ms`` is all the log ever held: it starts no earlier,
    and nothing was trimmed from it (events ever accepted against those kept; a Redis of
    version 7 or later also counts every stream's entries ever added)."""
    for p in range(partitions):
        for stream in (keys.events_stream(p), keys.decisions_stream(p)):
            if not await redis.exists(stream):
                continue
            info = await redis.xinfo_stream(stream)
            length = int(info["length"])
            first = info.get("first-entry")
            if first and stream_id(first[0]) < (since_ms, 0):
                return False
            added = info.get("entries-added")
            if added is not None and int(added) > length:
                return False
            if stream == keys.events_stream(p):
                accepted = await redis.get(keys.events_accepted(p))
                if accepted is not None and int(accepted) > length:
                    return False
    return True


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()
