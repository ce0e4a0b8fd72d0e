"""One micro-batch of feedback events applied to the users' embeddings (Algorithm 1).

1. one pipelined round trip for every user's state (``u:{id}:st``: version, momentum,
   the window of applied interaction hashes, the activity day) and embedding, and for the
   item vectors not yet cached;
2. with ``hold``, users whose freshness tier allows a delay are left out (the caller keeps
   their events pending);
3. Algorithm 1 vectorised over the users: the k-th new interaction of every user of the
   batch in one numpy step, k = 1, 2, ...; interactions already in a user's window are
   duplicates (a redelivery) and change nothing;
4. one compare-and-set script per user on the state's version, pipelined; a user whose
   version moved meanwhile (another worker) is re-read and recomputed, so no update is lost
   (seed 000 "Race Condition 1").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt
from redis.asyncio import Redis

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
from protocol.events import FeedbackEvent
from protocol.exceptions import MalformedMessage
from protocol.vectors import pack_half, unpack_vector

log = logging.getLogger(__name__)

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


class BatchApplier:
    """Applies batches of feedback events to the users' embeddings in Redis."""

    def __init__(
        self,
        redis: Redis,
        *,
        dim: int,
        clock: Callable[[], float],
        stats: WorkerStats,
        freshness: FreshnessPolicy = REAL_TIME,
        on_batch: Callable[[list[Published]], Awaitable[None]] | None = None,
    ) -> None:
        self._redis = redis
        self._dim = dim
        self._clock = clock
        self.stats = stats
        self._freshness = freshness
        self._on_batch = on_batch
        self._cas = redis.register_script(CAS_WRITE)
        self._items: dict[str, npt.NDArray[np.float32] | None] = {}

    @property
    def outcomes(self) -> Counter[Outcome]:
        return self.stats.outcomes

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
