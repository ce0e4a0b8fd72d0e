"""The streaming embedding worker: feedback events in, user embeddings out, in micro-batches.

Reads every ``events:{p}`` partition through the ``embedder`` consumer group and gathers up
to ``batch_size`` entries or ``max_wait_ms`` worth of them (seed 000 "Micro-Batching":
100 updates or 100 ms, whichever first). A batch is:

1. decoded (an entry that is not an event is parked in ``events:{p}:dead``) and filtered
   to the actions that move an embedding;
2. one pipelined round trip for every user's state (``u:{id}:st``: version, momentum,
   the window of applied interaction hashes) and embedding, and for the item vectors not
   yet in the worker's cache;
3. Algorithm 1 vectorised over the users: the k-th new interaction of every user of the
   batch in one numpy step, k = 1, 2, ...; interactions already in a user's window are
   duplicates (a redelivery) and change nothing;
4. one compare-and-set script per user on the state's version, pipelined; a user whose
   version moved meanwhile (another worker) is re-read and recomputed, so no update is lost
   (seed 000 "Race Condition 1");
5. only then the entries are acknowledged, so a worker killed mid-batch leaves them
   pending; another worker reclaims them (XAUTOCLAIM after ``claim_idle_ms``) and the
   windows make their second application a no-op: at-least-once delivery, exactly-once
   effect.

If computing a batch raises (a bug, a poison event), its entries are retried one by one
and the ones that still fail are parked with the reason; Redis failures are retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from origin.embedding_state import (
    WorkerState,
    decode_state,
    encode_state,
    interaction_hash,
    state_version,
)
from origin.embedding_update import ACTION_WEIGHTS, DECAY_HOURS, BatchState, update_rows
from origin.exceptions import VersionConflict
from origin.freshness_tiers import REAL_TIME, FreshnessPolicy
from protocol import keys
from protocol.events import EVENT_FIELD, FeedbackEvent, decode_event
from protocol.exceptions import MalformedMessage
from protocol.vectors import pack_half, unpack_vector

log = logging.getLogger(__name__)

# XREADGROUP's reply (RESP2, bytes): [(stream, [(entry_id, fields or None), ...]), ...]
StreamReply = list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes] | None]]]] | None

# KEYS[1] u:{id}:emb  KEYS[2] u:{id}:st
# ARGV[1] embedding (float16)  ARGV[2] state  ARGV[3] expected version
# Returns 1 written, 0 version conflict (re-read and retry).
CAS_WRITE = """
local state = redis.call('GET', KEYS[2])
local version = 0
if state and #state >= 4 then version = struct.unpack('<I4', state) end
if version ~= tonumber(ARGV[3]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return 1
"""

# A lost race re-reads and recomputes after a jittered pause of up to
# min(CAS_BACKOFF_MAX_S, CAS_BACKOFF_S * 2**attempt): eight writers hammering one user
# settle within a few rounds; a run of MAX_CAS_ATTEMPTS losses is treated as a Redis-side
# problem (the entries stay pending and are retried after a back-off).
MAX_CAS_ATTEMPTS = 25
CAS_BACKOFF_S = 0.0005
CAS_BACKOFF_MAX_S = 0.05
MAX_BACKOFF_S = 5.0
ITEM_CACHE_MAX = 200_000


class Outcome(StrEnum):
    APPLIED = "applied"
    DUPLICATE = "duplicate"
    NO_CHANGE = "no_change"  # not an embedding action, or nothing to move
    UNKNOWN_ITEM = "unknown_item"  # not in the catalog (of this dimension)
    MALFORMED = "malformed"  # dead-lettered: not an event
    FAILED = "failed"  # dead-lettered: applying it raised


# (user, new version, embedding) of a user whose update was written.
Published = tuple[str, int, npt.NDArray[np.float32]]


@dataclass(frozen=True, slots=True)
class Entry:
    stream: str
    entry_id: bytes
    raw: bytes | None  # None: a pending entry since deleted from the stream


@dataclass
class WorkerStats:
    """What a worker has done, for logs and benchmarks."""

    outcomes: Counter[Outcome] = field(default_factory=Counter)
    batches: int = 0
    entries: int = 0
    conflicts: int = 0
    reclaimed: int = 0
    trimmed: int = 0
    # Accepted-to-written time of each applied event, milliseconds (the last 10,000).
    freshness_ms: list[float] = field(default_factory=list)


async def ensure_groups(redis: Redis, partitions: int) -> None:
    """Create the consumer group on every partition, from the start of the stream, so that
    events appended before any worker ran are still delivered."""
    for stream in keys.events_streams(partitions):
        try:
            await redis.xgroup_create(stream, keys.EMBEDDER_GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise


@dataclass
class _User:
    """One user's part of a batch."""

    user_id: str
    state: WorkerState
    version: int  # the version read: the compare-and-set token
    events: list[FeedbackEvent] = field(default_factory=list)
    applied: list[int] = field(default_factory=list)  # interaction hashes, in order
    applied_accepted_ms: list[int] = field(default_factory=list)
    # Counted once the user's write succeeded (a lost race recomputes them).
    outcomes: Counter[Outcome] = field(default_factory=Counter)


def _stream_id(raw: bytes | str) -> tuple[int, int]:
    text = raw.decode() if isinstance(raw, bytes) else raw
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


async def trim_acknowledged(redis: Redis, stream: str) -> int:
    """Trim ``stream`` below the oldest entry some consumer group still needs: the first
    pending entry, or the last one delivered. Everything below was acknowledged by every
    group, so nothing unacknowledged is ever trimmed. Returns the entries removed."""
    floor: tuple[int, int] | None = None
    for group in await redis.xinfo_groups(stream):
        needed = _stream_id(group["last-delivered-id"])
        if group["pending"]:
            summary = await redis.xpending(stream, group["name"])
            needed = min(needed, _stream_id(summary["min"]))
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
    newest = _stream_id(info["last-generated-id"])
    for group in await redis.xinfo_groups(stream):
        if group["name"] in (keys.EMBEDDER_GROUP, keys.EMBEDDER_GROUP.encode()):
            delivered = _stream_id(group["last-delivered-id"])
            return max(0, newest[0] - delivered[0])
    return 0


class EmbeddingWorker:
    def __init__(
        self,
        redis: Redis,
        *,
        partitions: int,
        dim: int,
        consumer: str,
        clock: Callable[[], float],
        block_ms: int = 1000,
        batch_size: int = 100,
        max_wait_ms: int = 100,
        claim_idle_ms: int = 30_000,
        on_batch: Callable[[list[Published]], Awaitable[None]] | None = None,
        freshness: FreshnessPolicy = REAL_TIME,
    ) -> None:
        self._redis = redis
        self._streams = keys.events_streams(partitions)
        self._partition_of = {stream: p for p, stream in enumerate(self._streams)}
        self._partitions = partitions
        self._dim = dim
        self._consumer = consumer
        self._clock = clock
        self._block_ms = block_ms
        self._batch_size = batch_size
        self._max_wait_ms = max_wait_ms
        self._claim_idle_ms = claim_idle_ms
        # Reclaiming, trimming and publishing figures: often enough that a dead worker's
        # entries wait little more than ``claim_idle_ms``.
        self._upkeep_s = min(5.0, max(0.05, claim_idle_ms / 2000))
        # Called after each written batch with (user, new version, embedding) per user: the
        # Qdrant mirror, and the publish hook toward the edges' sync streams.
        self._on_batch = on_batch
        self._cas = redis.register_script(CAS_WRITE)
        self._items: dict[str, npt.NDArray[np.float32] | None] = {}
        self._freshness = freshness
        # Interactions of active and casual users held back by their freshness tier:
        # user -> (due, in stream order). Their entries stay pending until applied.
        self._held: dict[str, tuple[float, list[tuple[Entry, FeedbackEvent]]]] = {}
        self._held_ids: set[bytes] = set()
        self.stats = WorkerStats()

    @property
    def outcomes(self) -> Counter[Outcome]:
        return self.stats.outcomes

    # --- the loop ------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Poll until ``stop`` is set; the batch in hand is finished first (graceful
        shutdown). A Redis failure (lost connection, a consumer group gone after a flush)
        or a run of version conflicts leaves the entries pending; after a back-off the
        worker recreates missing groups and re-reads its own and stale pending entries."""
        backoff = 0.1
        recovering = True
        next_upkeep = 0.0
        while not stop.is_set():
            try:
                if recovering:
                    await ensure_groups(self._redis, self._partitions)
                    await self.drain_own_pending()
                    recovering = False
                if time.monotonic() >= next_upkeep:
                    await self.upkeep()
                    next_upkeep = time.monotonic() + self._upkeep_s
                await self.poll(">")
                backoff = 0.1
            except (RedisError, VersionConflict) as exc:
                log.warning("worker %s: %s; retrying in %.1fs", self._consumer, exc, backoff)
                recovering = True
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), backoff)
                backoff = min(MAX_BACKOFF_S, backoff * 2)

    async def drain_own_pending(self) -> None:
        """Entries delivered to this consumer name before a restart and never acknowledged."""
        while await self.poll("0") > 0:
            pass

    @property
    def held(self) -> int:
        """Entries held back by the freshness tiers."""
        return len(self._held_ids)

    async def upkeep(self) -> None:
        """Keep the lease on held entries, reclaim stale pending entries, trim acknowledged
        ones, publish the figures."""
        await self._renew_held()
        await self.reclaim()
        for stream in self._streams:
            self.stats.trimmed += await trim_acknowledged(self._redis, stream)
        await self.publish_stats()

    async def publish_stats(self) -> None:
        """The worker's figures in ``worker:{consumer}:stats`` (expiring if it dies)."""
        samples = sorted(self.stats.freshness_ms)

        def quantile(q: float) -> float:
            return samples[min(len(samples) - 1, int(q * len(samples)))] if samples else 0.0

        lag_ms = 0
        for stream in self._streams:
            lag_ms = max(lag_ms, await consumer_lag_ms(self._redis, stream))
        key = keys.worker_stats(self._consumer)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hset(
                key,
                mapping={
                    "batches": self.stats.batches,
                    "entries": self.stats.entries,
                    "applied": self.outcomes[Outcome.APPLIED],
                    "duplicates": self.outcomes[Outcome.DUPLICATE],
                    "conflicts": self.stats.conflicts,
                    "reclaimed": self.stats.reclaimed,
                    "trimmed": self.stats.trimmed,
                    "held": self.held,
                    "mean_batch": round(self.stats.entries / max(1, self.stats.batches), 1),
                    "freshness_p50_ms": round(quantile(0.5), 1),
                    "freshness_p99_ms": round(quantile(0.99), 1),
                    "lag_ms": lag_ms,
                    "updated_ms": int(self._clock() * 1000),
                },
            )
            pipe.expire(key, 60)
            await pipe.execute()

    async def reclaim(self) -> int:
        """Take over entries other consumers read but have not acknowledged for
        ``claim_idle_ms`` (a worker that died mid-batch), and apply them."""
        total = 0
        for stream in self._streams:
            start = "0-0"
            while True:
                reply = await self._redis.xautoclaim(
                    stream,
                    keys.EMBEDDER_GROUP,
                    self._consumer,
                    self._claim_idle_ms,
                    start_id=start,
                    count=self._batch_size,
                )
                start = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
                entries = [
                    Entry(stream, entry_id, (fields or {}).get(EVENT_FIELD) if fields else None)
                    for entry_id, fields in reply[1]
                ]
                if entries:
                    await self.handle(entries)
                    total += len(entries)
                if start == "0-0" or not entries:
                    break
        self.stats.reclaimed += total
        return total

    async def poll(self, position: str) -> int:
        """Read one batch (``">"``: new entries, up to ``batch_size`` or ``max_wait_ms``
        after the first; ``"0"``: this consumer's pending entries) and apply it; returns
        the number of entries handled."""
        await self.flush_held()
        entries = await self._read(position, block_ms=self._block_ms if position == ">" else None)
        if position == ">" and entries and len(entries) < self._batch_size:
            deadline = time.monotonic() + self._max_wait_ms / 1000
            while len(entries) < self._batch_size:
                left_ms = int((deadline - time.monotonic()) * 1000)
                if left_ms <= 0:
                    break
                more = await self._read(
                    ">", block_ms=left_ms, count=self._batch_size - len(entries)
                )
                if not more:
                    break
                entries.extend(more)
        if entries:
            await self.handle(entries)
        return len(entries)

    async def _read(
        self, position: str, *, block_ms: int | None, count: int | None = None
    ) -> list[Entry]:
        response = cast(
            StreamReply,
            await self._redis.xreadgroup(
                keys.EMBEDDER_GROUP,
                self._consumer,
                dict.fromkeys(self._streams, position),
                count=count or self._batch_size,
                block=block_ms,
            ),
        )
        return [
            Entry(stream.decode(), entry_id, fields.get(EVENT_FIELD, b"") if fields else None)
            for stream, batch in response or []
            for entry_id, fields in batch
        ]

    # --- one batch -------------------------------------------------------------------------

    async def handle(self, entries: Sequence[Entry]) -> None:
        """Apply a batch and acknowledge it. Redis failures propagate (the entries stay
        pending); any other failure is isolated to the entries that cause it."""
        self.stats.batches += 1
        self.stats.entries += len(entries)
        events: list[tuple[Entry, FeedbackEvent]] = []
        for entry in entries:
            if entry.raw is None or entry.entry_id in self._held_ids:
                continue
            try:
                event = decode_event(entry.raw)
            except MalformedMessage as exc:
                await self._park(entry, Outcome.MALFORMED, str(exc))
                continue
            if event.user_id in self._held:  # keep the user's order: behind what is held
                self._hold(event.user_id, entry, event, due=None)
            else:
                events.append((entry, event))
        delays = await self._process_isolated(events, hold=True)
        for entry, event in events:
            delay = delays.get(event.user_id)
            if delay is not None:
                self._hold(event.user_id, entry, event, due=self._clock() + delay)
        await self._ack([e for e in entries if e.entry_id not in self._held_ids])

    async def flush_held(self, *, everything: bool = False) -> int:
        """Apply the held interactions whose tier delay is over (all of them with
        ``everything``), then acknowledge them; returns how many."""
        now = self._clock()
        due = [u for u, (at, _) in self._held.items() if everything or at <= now]
        if not due:
            return 0
        held = [item for user in due for item in self._held[user][1]]
        await self._process_isolated(held, hold=False)
        for user in due:
            del self._held[user]
        self._held_ids.difference_update(entry.entry_id for entry, _ in held)
        await self._ack([entry for entry, _ in held])
        return len(held)

    def _hold(self, user: str, entry: Entry, event: FeedbackEvent, due: float | None) -> None:
        at, items = self._held.get(user, (due if due is not None else self._clock(), []))
        items.append((entry, event))
        self._held[user] = (at, items)
        self._held_ids.add(entry.entry_id)

    async def _renew_held(self) -> None:
        """Claim held entries again (idle time back to 0), so that no other worker takes
        them for a dead worker's."""
        by_stream: dict[str, list[Any]] = {}
        for _, items in self._held.values():
            for entry, _ in items:
                by_stream.setdefault(entry.stream, []).append(entry.entry_id)
        for stream, ids in by_stream.items():
            await self._redis.xclaim(
                stream, keys.EMBEDDER_GROUP, self._consumer, 0, ids, justid=True
            )

    async def _process_isolated(
        self, events: Sequence[tuple[Entry, FeedbackEvent]], *, hold: bool
    ) -> dict[str, float]:
        """``process`` the events; if that raises (not Redis), one by one, parking those
        that still fail. Returns the users held back with their delays."""
        try:
            return await self.process([event for _, event in events], hold=hold)
        except (RedisError, VersionConflict):
            raise
        except Exception:
            log.exception("a batch of %d events failed; applying them one by one", len(events))
        delays: dict[str, float] = {}
        for entry, event in events:
            try:
                delays.update(await self.process([event], hold=hold))
            except (RedisError, VersionConflict):
                raise
            except Exception as exc:  # a bug or a poison event: park it
                await self._park(entry, Outcome.FAILED, repr(exc))
        return delays

    async def process(
        self, events: Sequence[FeedbackEvent], *, hold: bool = False
    ) -> dict[str, float]:
        """Apply ``events`` (in stream order) to the users' embeddings, written before this
        returns; conflicting users are re-read and recomputed. With ``hold``, users whose
        freshness tier allows a delay are not applied: returned with their delay."""
        relevant = []
        for event in events:
            if event.action in ACTION_WEIGHTS:
                relevant.append(event)
            else:
                self.outcomes[Outcome.NO_CHANGE] += 1
        held: dict[str, float] = {}
        for attempt in range(MAX_CAS_ATTEMPTS):
            if not relevant:
                return held
            if attempt:
                # Another writer won the last round: step aside for a jittered moment.
                pause = min(CAS_BACKOFF_MAX_S, CAS_BACKOFF_S * 2**attempt)
                await asyncio.sleep(random.uniform(0, pause))
            conflicted, delayed = await self._apply_once(relevant, hold=hold)
            held.update(delayed)
            if not conflicted:
                return held
            self.stats.conflicts += len(conflicted)
            relevant = [e for e in relevant if e.user_id in conflicted]
        raise VersionConflict(f"{len(relevant)} events: {MAX_CAS_ATTEMPTS} conflicts in a row")

    async def _apply_once(
        self, events: Sequence[FeedbackEvent], *, hold: bool
    ) -> tuple[set[str], dict[str, float]]:
        """One read-compute-write round; returns the users whose write lost a race, and
        the users held back by their tier (with ``hold``) with their delays."""
        users: dict[str, _User] = {}
        for event in events:
            user = users.setdefault(event.user_id, _User(event.user_id, WorkerState(), 0))
            user.events.append(event)
        order = list(users.values())
        batch = await self._read_states(order, {e.item_id for e in events})
        now = self._clock()
        delayed: dict[str, float] = {}
        if hold:
            for user in order:
                today = user.state.interactions_today(int(now)) + len(user.events)
                delay = self._freshness.delay_s(today)
                if delay > 0:
                    delayed[user.user_id] = delay
            if delayed:
                keep = [row for row, user in enumerate(order) if user.user_id not in delayed]
                order = [order[row] for row in keep]
                batch = BatchState(
                    embedding=batch.embedding[keep],
                    has_embedding=batch.has_embedding[keep],
                    momentum=batch.momentum[keep],
                    has_momentum=batch.has_momentum[keep],
                )
        if not order:
            return set(), delayed
        self._compute(order, batch, now)
        return await self._write(order, batch, now), delayed

    async def _read_states(self, order: list[_User], item_ids: set[str]) -> BatchState:
        """Every user's state and embedding, and the item vectors not cached yet, in one
        pipelined round trip."""
        missing_items = sorted(item_ids - self._items.keys())
        async with self._redis.pipeline(transaction=False) as pipe:
            for user in order:
                # Both keys share the user's hash tag: one MGET, cluster-safe.
                pipe.mget(keys.user_state(user.user_id), keys.user_embedding(user.user_id))
            for item_id in missing_items:
                pipe.get(keys.item_vector(item_id))
            replies = await pipe.execute()
        self._cache_items(missing_items, replies[len(order) :])
        batch = BatchState(
            embedding=np.zeros((len(order), self._dim), np.float32),
            has_embedding=np.zeros(len(order), dtype=bool),
            momentum=np.zeros((len(order), self._dim), np.float32),
            has_momentum=np.zeros(len(order), dtype=bool),
        )
        for row, user in enumerate(order):
            raw_state, raw_embedding = replies[row]
            self._load(user, batch, row, raw_state, raw_embedding)
        return batch

    def _compute(self, order: list[_User], batch: BatchState, now: float) -> None:
        """Algorithm 1 over the batch: round k applies every user's k-th new interaction
        in one vectorised step."""
        seen: list[set[int]] = [set(user.state.window) for user in order]
        for k in range(max(len(user.events) for user in order)):
            rows: list[int] = []
            items: list[npt.NDArray[np.float32]] = []
            weights: list[float] = []
            for row, user in enumerate(order):
                if k >= len(user.events):
                    continue
                event = user.events[k]
                ix = interaction_hash(event.interaction_id)
                if ix in seen[row]:
                    user.outcomes[Outcome.DUPLICATE] += 1
                    continue
                seen[row].add(ix)
                item = self._items.get(event.item_id)
                if item is None:
                    user.outcomes[Outcome.UNKNOWN_ITEM] += 1
                    continue
                age_hours = max(0.0, now - event.timestamp_ms / 1000) / 3600
                rows.append(row)
                items.append(item)
                weights.append(ACTION_WEIGHTS[event.action] * math.exp(-age_hours / DECAY_HOURS))
            if not rows:
                continue
            changed = update_rows(
                batch, np.array(rows, np.intp), np.stack(items), np.array(weights)
            )
            for row, moved in zip(rows, changed, strict=True):
                user, event = order[row], order[row].events[k]
                if moved:
                    user.applied.append(interaction_hash(event.interaction_id))
                    user.applied_accepted_ms.append(event.accepted_ms)
                    user.outcomes[Outcome.APPLIED] += 1
                else:
                    user.outcomes[Outcome.NO_CHANGE] += 1

    def _load(
        self,
        user: _User,
        batch: BatchState,
        row: int,
        raw_state: bytes | None,
        raw_embedding: bytes | None,
    ) -> None:
        try:
            user.state = decode_state(raw_state, self._dim)
        except MalformedMessage:
            # Unreadable: start afresh, but keep the version so the write still races fairly.
            log.warning("state of %s is damaged; starting it afresh", user.user_id)
            user.state = WorkerState(version=state_version(raw_state))
        user.version = user.state.version
        if user.state.momentum is not None:
            batch.momentum[row] = user.state.momentum
            batch.has_momentum[row] = True
        if raw_embedding:
            with contextlib.suppress(ValueError):  # another dimension: start afresh
                batch.embedding[row] = unpack_vector(raw_embedding, self._dim)
                batch.has_embedding[row] = True

    async def _write(self, order: list[_User], batch: BatchState, now: float) -> set[str]:
        for user in order:
            if not user.applied:  # nothing to write: its outcomes stand
                self.outcomes.update(user.outcomes)
        written = [(row, user) for row, user in enumerate(order) if user.applied]
        if not written:
            return set()
        now_ms = int(now * 1000)
        async with self._redis.pipeline(transaction=False) as pipe:
            for row, user in written:
                day_start_s, day_count = user.state.day_after(int(now), len(user.applied))
                state = WorkerState(
                    version=user.version + len(user.applied),
                    updated_ms=now_ms,
                    momentum=batch.momentum[row] if batch.has_momentum[row] else None,
                    window=user.state.with_applied(user.applied),
                    day_start_s=day_start_s,
                    day_count=day_count,
                )
                await self._cas(
                    keys=[keys.user_embedding(user.user_id), keys.user_state(user.user_id)],
                    args=[
                        pack_half(batch.embedding[row]),
                        encode_state(state, self._dim),
                        user.version,
                    ],
                    client=pipe,
                )
            results = await pipe.execute()
        conflicted: set[str] = set()
        published: list[Published] = []
        for (row, user), result in zip(written, results, strict=True):
            if int(result) == 1:
                version = user.version + len(user.applied)
                published.append((user.user_id, version, batch.embedding[row].copy()))
                self.outcomes.update(user.outcomes)
                for accepted_ms in user.applied_accepted_ms:
                    self._record_freshness(now_ms - accepted_ms)
            else:
                conflicted.add(user.user_id)
        if published and self._on_batch is not None:
            await self._on_batch(published)
        return conflicted

    def _record_freshness(self, ms: float) -> None:
        samples = self.stats.freshness_ms
        samples.append(ms)
        if len(samples) > 10_000:
            del samples[: len(samples) - 10_000]

    def _cache_items(self, item_ids: list[str], raws: list[Any]) -> None:
        if len(self._items) + len(item_ids) > ITEM_CACHE_MAX:
            self._items.clear()
        for item_id, raw in zip(item_ids, raws, strict=True):
            vector = None
            if raw is not None:
                with contextlib.suppress(ValueError):  # another dimension: not in our space
                    vector = unpack_vector(raw, self._dim)
            self._items[item_id] = vector

    def forget_items(self) -> None:
        """Drop cached item vectors (after a catalog change)."""
        self._items.clear()

    async def _ack(self, entries: Sequence[Entry]) -> None:
        by_stream: dict[str, list[bytes]] = {}
        for entry in entries:
            by_stream.setdefault(entry.stream, []).append(entry.entry_id)
        async with self._redis.pipeline(transaction=False) as pipe:
            for stream, ids in by_stream.items():
                pipe.xack(stream, keys.EMBEDDER_GROUP, *ids)
            await pipe.execute()

    async def _park(self, entry: Entry, outcome: Outcome, reason: str) -> None:
        """An entry that can never be applied goes to the partition's dead-letter stream
        with the reason, so that it neither blocks the partition nor is lost."""
        self.outcomes[outcome] += 1
        log.warning("dead-lettering %s of %s: %s", entry.entry_id, entry.stream, reason)
        await self._redis.xadd(
            keys.dead_letters(self._partition_of[entry.stream]),
            {
                "entry": entry.entry_id,
                "e": entry.raw or b"",
                "reason": reason,
                "consumer": self._consumer,
            },
        )
