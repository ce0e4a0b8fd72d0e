"""Retention of the logs: what their streams keep, by age and by size, never by
acknowledgement.

Every partition of the logs (``events:{p}``, ``decisions:{p}``, ``contexts:{p}``,
``rewards:{p}``, ``shadow:{p}``) keeps what came in the last ``seconds`` and at most about
``entries`` entries (``PERSO_EVENT_RETENTION_*`` for the events, ``PERSO_DECISION_RETENTION_*``
for the other four): what ``perso recompute`` computes the users' models again from and offline
evaluation reads. The workers' elected trimmer (``coordination.leader``) trims them once per
upkeep (``LogTrimmer.trim``), approximately (``XTRIM MINID ~`` and ``MAXLEN ~``: whole
radix-tree nodes, at most 10,000 entries a call), so a partition nobody appends to still
ages. The logs no consumer group reads are trimmed where they are appended to as well.

The safety floor: a stream that a consumer group reads (the events and the decisions, read
by ``embedder``) is never trimmed past the oldest entry a group still needs (its oldest
pending entry, else the last one delivered): a backlog older than the retention (workers
down for a week) waits for them instead of being lost. The size cap goes only as far as it
can without reaching that entry, which a count of the backlog in Redis proves (up to
``BACKLOG_PROBE`` entries; a longer backlog counts as one the cap cannot pass). Every stream
the floor spares is counted (``retention_spared`` in the worker's figures) and logged
when it begins and when it ends.

The rules are pure functions: ``retention_point``, ``floor_of``, ``plan``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import ResponseError

from config.settings import Settings
from decision_log.writer import Retention
from origin.event_streams.streams import needed_from, stream_id
from protocol import keys
from redis_client.client import RedisClient, queue_script

log = logging.getLogger(__name__)

StreamId = tuple[int, int]

# The longest backlog counted (in Redis, entries never travel) to prove that the size cap
# leaves every entry a group needs: bounds the upkeep's work while the workers are behind.
BACKLOG_PROBE = 10_000

# What each log's partition is, by the retention it follows.
EVENT_LOGS: tuple[Callable[[int], str], ...] = (keys.events_stream,)
OTHER_LOGS: tuple[Callable[[int], str], ...] = (
    keys.decisions_stream,
    keys.contexts_stream,
    keys.rewards_stream,
    keys.shadow_stream,
)


@dataclass(frozen=True)
class LogRetention:
    """How long and how many entries a partition of each log keeps."""

    events: Retention = Retention(7 * 86_400.0, 1_000_000)  # noqa: RUF009 - frozen
    # The decisions and the logs beside them (contexts, rewards, shadow).
    logs: Retention = Retention()  # noqa: RUF009 - frozen


def configured_retention(settings: Settings) -> LogRetention:
    """``PERSO_EVENT_RETENTION_*`` and ``PERSO_DECISION_RETENTION_*``."""
    return LogRetention(
        Retention(settings.event_retention_s, settings.event_retention_entries),
        Retention(settings.decision_retention_s, settings.decision_retention_entries),
    )


@dataclass(frozen=True)
class StreamFacts:
    """What the trimmer knows of one stream before trimming it."""

    length: int
    # The oldest id a group still needs (``streams.needed_from``); None: no group reads it.
    floor: StreamId | None
    needed: StreamId | None = None  # the first entry at or after the floor; None: none
    # Entries at or after the floor, counted up to one more than the size cap (enough to
    # know the backlog is longer than it); None: not known.
    backlog: int | None = None


@dataclass(frozen=True)
class TrimPlan:
    """One stream's trim: below ``min_id`` goes (``MINID ~``), then all but the newest
    ``max_len`` (``MAXLEN ~``; None: no size trim), and whether the floor keeps entries
    that the retention would remove."""

    min_id: StreamId
    max_len: int | None
    spared: bool


def retention_point(now_ms: int, seconds: float) -> StreamId:
    """The oldest id the age retention keeps: entries below it are older than ``seconds``."""
    return max(0, now_ms - int(seconds * 1000)), 0


def floor_of(groups: Iterable[tuple[bytes | str, bytes | str | None]]) -> StreamId | None:
    """The oldest entry that any group, given as (last delivered, oldest pending or None),
    still needs (``streams.needed_from``); None when no group reads the stream."""
    needs = [needed_from(delivered, pending) for delivered, pending in groups]
    return min(needs) if needs else None


def plan(facts: StreamFacts, retention: Retention, now_ms: int) -> TrimPlan:
    """What to trim of a stream: each rule, age and size, goes as far as it may without
    passing the floor. By age: below the older of the retention point and the floor. By
    size: down to the cap when the backlog fits in it; to the floor when the backlog is
    known to be longer than the cap; not at all when its length is not known (the cap
    might then keep entries that trimming to the floor would remove)."""
    age = retention_point(now_ms, retention.seconds)
    if facts.floor is None:
        return TrimPlan(age, retention.entries, spared=False)
    # No entry lies between the floor and the first one needed (the ids that come later
    # are all newer), so that entry is the bound; none needed, only the retention is.
    needed = facts.needed
    min_id = age if needed is None else min(age, needed)
    max_len = None
    spared = needed is not None and needed < age
    if facts.length > retention.entries:
        if facts.backlog is not None and facts.backlog <= retention.entries:
            max_len = retention.entries
        else:
            spared = True
            if facts.backlog is not None and needed is not None:
                min_id = needed
    return TrimPlan(min_id, max_len, spared)


@dataclass
class Trimmed:
    """What one trim did: entries removed, and the streams the floor spared."""

    removed: int = 0
    # Stream -> the first entry a group still needs there (else its floor).
    spared: dict[str, StreamId | None] = field(default_factory=dict)


# KEYS[1] a stream   ARGV[1] an entry id   ARGV[2] the most to count
# Returns {n, the first id} of the entries at or after ARGV[1], counting up to ARGV[2], or
# {0}: the backlog a consumer group still needs, counted where the entries are (they do
# not travel).
BACKLOG = """
local entries = redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', ARGV[2])
if #entries == 0 then return {0} end
return {#entries, entries[1][1]}
"""


class LogTrimmer:
    """Trims every partition of the logs to its retention, under the safety floor."""

    def __init__(self, redis: RedisClient, partitions: int, retention: LogRetention) -> None:
        self._redis = redis
        self._retention_of = {
            make(p): retention.events if make in EVENT_LOGS else retention.logs
            for p in range(partitions)
            for make in (*EVENT_LOGS, *OTHER_LOGS)
        }
        self._backlog = redis.register_script(BACKLOG)
        self._spared: set[str] = set()  # the streams spared at the last trim

    async def trim(self, now_ms: int) -> Trimmed:
        """One trim of every stream (a few pipelined round trips in all)."""
        facts = await self.facts()
        plans = {s: plan(f, self._retention_of[s], now_ms) for s, f in facts.items()}
        removed = 0
        async with self._redis.pipeline(transaction=False) as pipe:
            for stream, p in plans.items():
                pipe.xtrim(stream, minid=f"{p.min_id[0]}-{p.min_id[1]}", approximate=True)
                if p.max_len is not None:
                    pipe.xtrim(stream, maxlen=p.max_len, approximate=True)
            for reply in await pipe.execute():
                removed += int(reply)
        spared = {s: f.needed or f.floor for s, f in facts.items() if plans[s].spared}
        self._log_changes(spared, now_ms)
        return Trimmed(removed, spared)

    async def facts(self) -> dict[str, StreamFacts]:
        """Each stream's length, its floor, the first entry a group needs and, where the
        size cap might reach it, the backlog."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for stream in self._retention_of:
                pipe.xlen(stream)
                pipe.xinfo_groups(stream)
            replies = await pipe.execute(raise_on_error=False)
        groups_of: dict[str, list[dict[Any, Any]]] = {}
        lengths: dict[str, int] = {}
        for stream, length, groups in zip(
            self._retention_of, replies[::2], replies[1::2], strict=True
        ):
            if isinstance(length, Exception):
                raise length
            if isinstance(groups, ResponseError):  # no such stream (yet)
                continue
            if isinstance(groups, Exception):
                raise groups
            lengths[stream], groups_of[stream] = int(length), groups
        # The oldest pending entry of each group with any. Read after the groups' summary:
        # the floor only moves forward (acknowledgements, deliveries) unless a group is
        # created anew, which the workers do only where there was none.
        pending_of = [
            (stream, group["name"])
            for stream, groups in groups_of.items()
            for group in groups
            if group["pending"]
        ]
        oldest_pending: dict[tuple[str, Any], bytes | str | None] = {}
        if pending_of:
            async with self._redis.pipeline(transaction=False) as pipe:
                for stream, name in pending_of:
                    pipe.xpending(stream, name)
                for key, summary in zip(pending_of, await pipe.execute(), strict=True):
                    # None when all were acknowledged since the summary was read.
                    oldest_pending[key] = summary["min"]
        floors = {
            stream: floor_of(
                (g["last-delivered-id"], oldest_pending.get((stream, g["name"]))) for g in groups
            )
            for stream, groups in groups_of.items()
        }
        return await self._backlogs(lengths, floors)

    async def _backlogs(
        self, lengths: dict[str, int], floors: dict[str, StreamId | None]
    ) -> dict[str, StreamFacts]:
        """The first entry each group-read stream still needs, and its backlog where the
        stream is over its size cap (counted up to the cap, at most ``BACKLOG_PROBE``)."""
        facts = {s: StreamFacts(lengths[s], None) for s, f in floors.items() if f is None}
        read = {s: f for s, f in floors.items() if f is not None}
        if not read:
            return facts
        limits = {
            s: min(self._retention_of[s].entries + 1, BACKLOG_PROBE)
            if lengths[s] > self._retention_of[s].entries
            else 1
            for s in read
        }
        async with self._redis.pipeline(transaction=False) as pipe:
            for stream, (ms, seq) in read.items():
                await queue_script(pipe, self._backlog, [stream], [f"{ms}-{seq}", limits[stream]])
            replies = await pipe.execute()
        for (stream, floor), reply in zip(read.items(), replies, strict=True):
            count, cap = int(reply[0]), self._retention_of[stream].entries
            facts[stream] = StreamFacts(
                lengths[stream],
                floor,
                needed=stream_id(reply[1]) if count else None,
                # Counting stopped at the probe's limit, short of the cap: not known.
                backlog=count if count < limits[stream] or limits[stream] > cap else None,
            )
        return facts

    def _log_changes(self, spared: dict[str, StreamId | None], now_ms: int) -> None:
        """Say when the floor begins and stops sparing a stream (not at every trim)."""
        for stream in sorted(spared.keys() - self._spared):
            needed = spared[stream]
            age_s = max(0, now_ms - needed[0]) / 1000 if needed is not None else 0.0
            log.warning(
                "%s: the consumer group still needs entries from %.0f s ago; kept beyond the "
                "retention until the workers have them",
                stream,
                age_s,
            )
        for stream in sorted(self._spared - spared.keys()):
            log.info("%s: the workers caught up; trimmed to its retention again", stream)
        self._spared = set(spared)
