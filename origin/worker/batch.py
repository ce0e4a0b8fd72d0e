"""One micro-batch of observations applied to the users' models (``relevance.user_model``).

An observation is what a user did with an item: an engagement (a click or better) or a
dismiss, straight from the feedback events; or an item shown and left alone, from a
closed decision (``origin.worker.joins``), weighted by the chance that it was examined.
Per batch:

1. one pipelined round trip: every user's record (``u:{id}:st``: model, version, window,
   activity day), the item vectors not cached yet, and the items' posteriors over all
   contexts (each item's baseline, the offset of the user's term);
2. with ``defer``, users whose freshness tier allows a delay are left out (the caller keeps
   their events pending);
3. each user's new observations applied in order, under the population prior
   (``relevance.population``; the record keeps the model as learnt under the configured
   one): the model's variance first relaxed for the time since its last update, then one
   assumed-density-filtering step each.
   Observations are applied once: each carries an id (an interaction's, or a decision's
   closing, shared by all of that decision's items), and an id already in the user's window
   is a duplicate (a redelivery) that changes nothing;
4. one compare-and-set script per user on the record's version, pipelined; a user whose
   version moved meanwhile (another worker) is re-read and recomputed, so no update is lost
   (the version compare-and-swap).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from origin.exceptions import VersionConflict
from origin.learned.posteriors import PosteriorStore
from origin.learned.user_models import (
    UserRecord,
    decode_record,
    encode_record,
    observation_hash,
    record_version,
)
from origin.worker.freshness_tiers import REAL_TIME, FreshnessPolicy
from protocol import keys
from protocol.exceptions import MalformedMessage
from protocol.vectors import unpack_vector
from redis_client.client import RedisClient, queue_script
from relevance.normal import ppf
from relevance.population import Population, learnt, under
from relevance.user_model import PRIOR_SCALE, UserModel, relaxed, updated
from resilience.backoff import decorrelated

log = logging.getLogger(__name__)

# KEYS[1] u:{id}:st   ARGV[1] the new record   ARGV[2] expected version
# Returns 1 written, 0 version conflict (re-read and retry).
CAS_WRITE = """
local record = redis.call('GET', KEYS[1])
local version = 0
if record and #record >= 4 then version = struct.unpack('<I4', record) end
if version ~= tonumber(ARGV[2]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""

# A lost race re-reads and recomputes after a pause with decorrelated jitter between
# CAS_BACKOFF_S and CAS_BACKOFF_MAX_S (resilience.backoff): eight writers hammering one
# user settle within a few rounds; a run of MAX_CAS_ATTEMPTS losses is treated as a Redis-side
# problem (the entries stay pending and are retried after a back-off).
MAX_CAS_ATTEMPTS = 25
CAS_BACKOFF_S = 0.0005
CAS_BACKOFF_MAX_S = 0.05
ITEM_CACHE_MAX = 200_000


class Outcome(StrEnum):
    APPLIED = "applied"
    DUPLICATE = "duplicate"
    NO_CHANGE = "no_change"  # an action that teaches the model nothing (a view)
    UNKNOWN_ITEM = "unknown_item"  # not in the catalog (of this dimension)
    MALFORMED = "malformed"  # dead-lettered: not an event
    FAILED = "failed"  # dead-lettered: applying it raised


@dataclass(frozen=True, slots=True)
class Observation:
    """What a user did with an item, to be applied to their model once."""

    user_id: str
    item_id: str
    engaged: bool
    weight: float  # 1 for an engagement or a dismiss; a miss: P(examined | not engaged)
    observation_id: str  # an interaction id, or a decision's closing
    accepted_ms: int  # when the origin accepted it (freshness)
    interaction: bool  # an interaction of the user's (counts toward the activity day)


# (user, new version, model) of a user whose update was written.
Published = tuple[str, int, UserModel]


@dataclass(frozen=True)
class ModelConfig:
    """How the users' models learn (``relevance.user_model``)."""

    prior_scale: float = PRIOR_SCALE
    # Without news, a user's certainty fades halfway back to the prior in this time.
    drift_half_life_s: float = 7 * 86_400.0


@dataclass
class WorkerStats:
    """What a worker has done, for logs and benchmarks."""

    outcomes: Counter[Outcome] = field(default_factory=Counter)
    batches: int = 0
    entries: int = 0
    conflicts: int = 0
    reclaimed: int = 0
    trimmed: int = 0
    # Streams the retention's safety floor deferred, summed over the trims: a consumer
    # group still needed entries older than the retention or beyond its size cap.
    retention_spared: int = 0
    decisions: int = 0  # decision records read
    closed: int = 0  # decisions whose rewards were applied
    population_version: int = 0  # the population prior this worker estimated last
    # Accepted-to-written time of each applied interaction, milliseconds (the last 10,000).
    freshness_ms: list[float] = field(default_factory=list)


@dataclass
class _User:
    """One user's part of a batch."""

    user_id: str
    record: UserRecord
    version: int  # the version read: the compare-and-set token
    observations: list[Observation] = field(default_factory=list)
    model: UserModel | None = None  # after this batch
    applied: list[int] = field(default_factory=list)  # observation hashes, in order
    interactions: int = 0  # applied interactions (the activity day)
    applied_accepted_ms: list[int] = field(default_factory=list)
    # Counted once the user's write succeeded (a lost race recomputes them).
    outcomes: Counter[Outcome] = field(default_factory=Counter)


class BatchApplier:
    """Applies batches of observations to the users' models in Redis."""

    def __init__(
        self,
        redis: RedisClient,
        *,
        dim: int,
        clock: Callable[[], float],
        stats: WorkerStats,
        posteriors: PosteriorStore,
        model: ModelConfig = ModelConfig(),
        freshness: FreshnessPolicy = REAL_TIME,
        on_batch: Callable[[list[Published]], Awaitable[None]] | None = None,
    ) -> None:
        self._redis = redis
        self._dim = dim
        self._clock = clock
        self.stats = stats
        self._posteriors = posteriors
        self._model = model
        self._prior_var = model.prior_scale / dim
        self._freshness = freshness
        self._on_batch = on_batch
        self._cas = redis.register_script(CAS_WRITE)
        self._items: dict[str, npt.NDArray[np.float32] | None] = {}
        # The population prior the users are updated under (``origin.worker.population``
        # keeps it current); None: the configured one.
        self.population: Population | None = None

    @property
    def outcomes(self) -> Counter[Outcome]:
        return self.stats.outcomes

    async def process(
        self, observations: Sequence[Observation], *, defer: bool = False
    ) -> dict[str, float]:
        """Apply ``observations`` (in stream order) to the users' models, written before
        this returns; conflicting users are re-read and recomputed. With ``defer``, users
        whose freshness tier allows a delay are not applied: returned with their delay."""
        relevant = list(observations)
        deferred: dict[str, float] = {}
        pause = 0.0
        for attempt in range(MAX_CAS_ATTEMPTS):
            if not relevant:
                return deferred
            if attempt:
                # Another writer won the last round: step aside for a jittered moment.
                pause = decorrelated(pause, random.random(), CAS_BACKOFF_S, CAS_BACKOFF_MAX_S)
                await asyncio.sleep(pause)
            conflicted, delayed = await self._apply_once(relevant, defer=defer)
            deferred.update(delayed)
            if not conflicted:
                return deferred
            self.stats.conflicts += len(conflicted)
            relevant = [o for o in relevant if o.user_id in conflicted]
        raise VersionConflict(
            f"{len(relevant)} observations: {MAX_CAS_ATTEMPTS} conflicts in a row"
        )

    async def _apply_once(
        self, observations: Sequence[Observation], *, defer: bool
    ) -> tuple[set[str], dict[str, float]]:
        """One read-compute-write round; returns the users whose write lost a race, and
        the users deferred by their tier (with ``defer``) with their delays."""
        users: dict[str, _User] = {}
        for o in observations:
            user = users.setdefault(o.user_id, _User(o.user_id, UserRecord(), 0))
            user.observations.append(o)
        order = list(users.values())
        baselines = await self._read(order, {o.item_id for o in observations})
        now = self._clock()
        delayed: dict[str, float] = {}
        if defer:
            for user in order:
                fresh = sum(1 for o in user.observations if o.interaction)
                delay = self._freshness.delay_s(user.record.interactions_today(int(now)) + fresh)
                if delay > 0:
                    delayed[user.user_id] = delay
            order = [user for user in order if user.user_id not in delayed]
        for user in order:
            self._compute(user, baselines, now)
        return await self._write(order, now), delayed

    async def _read(self, order: list[_User], item_ids: set[str]) -> dict[str, float]:
        """Every user's record and the item vectors not cached yet, in one pipelined round
        trip; then the items' baselines (probit of their all-context rate)."""
        missing_items = sorted(item_ids - self._items.keys())
        async with self._redis.pipeline(transaction=False) as pipe:
            for user in order:
                pipe.get(keys.user_record(user.user_id))
            for item_id in missing_items:
                pipe.get(keys.item_vector(item_id))
            replies = await pipe.execute()
        self._cache_items(missing_items, replies[len(order) :])
        for user, raw in zip(order, replies, strict=False):
            self._load(user, raw)
        ids = sorted(item_ids)
        # An item nobody has engaged with yet gets the typical rate, not even odds.
        rates = await self._posteriors.rates(ids, self._clock() * 1000)
        return dict(zip(ids, ppf(rates).tolist(), strict=True))

    def _compute(self, user: _User, baselines: dict[str, float], now: float) -> None:
        """The user's new observations, in order, applied to their model."""
        record = user.record
        seen = set(record.window)
        groups: dict[int, list[Observation]] = {}
        for o in user.observations:
            group = groups.setdefault(observation_hash(o.observation_id), [])
            # An observation delivered twice in one batch (a redelivery) is one observation.
            if any(g.item_id == o.item_id for g in group):
                user.outcomes[Outcome.DUPLICATE] += 1
            else:
                group.append(o)
        # Updated under the population prior (``relevance.population``), stored as learnt.
        population = self.population
        prior_var = population.marginal() if population is not None else self._prior_var
        model = None if record.model is None else under(record.model, self._prior_var, population)
        for ix, group in groups.items():
            if ix in seen:
                user.outcomes[Outcome.DUPLICATE] += len(group)
                continue
            seen.add(ix)
            rows = [(o, self._items.get(o.item_id)) for o in group]
            known = [(o, x) for o, x in rows if x is not None]
            user.outcomes[Outcome.UNKNOWN_ITEM] += len(rows) - len(known)
            if not known:
                continue
            if model is None:
                model = under(
                    UserModel.prior(self._dim, self._model.prior_scale), self._prior_var, population
                )
            else:
                elapsed = now - max(record.updated_ms / 1000, 0.0)
                model = relaxed(model, elapsed, prior_var, self._model.drift_half_life_s)
            model = updated(
                model,
                np.stack([x for _, x in known]),
                np.array([baselines.get(o.item_id, -2.0) for o, _ in known]),
                np.array([o.engaged for o, _ in known]),
                np.array([o.weight for o, _ in known]),
                prior_var=prior_var,
            )
            user.applied.append(ix)
            user.outcomes[Outcome.APPLIED] += len(known)
            for o, _ in known:
                if o.interaction:
                    user.interactions += 1
                    user.applied_accepted_ms.append(o.accepted_ms)
        user.model = None if model is None else learnt(model, self._prior_var, population)

    def _load(self, user: _User, raw: bytes | None) -> None:
        try:
            user.record = decode_record(raw, self._dim)
        except MalformedMessage:
            # Unreadable: start afresh, but keep the version so the write still races fairly.
            log.warning("record of %s is damaged; starting it afresh", user.user_id)
            user.record = UserRecord(version=record_version(raw))
        user.version = user.record.version

    async def _write(self, order: list[_User], now: float) -> set[str]:
        for user in order:
            if not user.applied:  # nothing to write: its outcomes stand
                self.outcomes.update(user.outcomes)
        written = [user for user in order if user.applied]
        if not written:
            return set()
        now_ms = int(now * 1000)
        async with self._redis.pipeline(transaction=False) as pipe:
            for user in written:
                day_start_s, day_count = user.record.day_after(int(now), user.interactions)
                record = UserRecord(
                    version=user.version + 1,
                    updated_ms=now_ms,
                    model=user.model,
                    window=user.record.with_applied(user.applied),
                    day_start_s=day_start_s,
                    day_count=day_count,
                )
                await queue_script(
                    pipe,
                    self._cas,
                    [keys.user_record(user.user_id)],
                    [encode_record(record, self._dim), user.version],
                )
            results = await pipe.execute()
        conflicted: set[str] = set()
        published: list[Published] = []
        for user, result in zip(written, results, strict=True):
            if int(result) == 1:
                assert user.model is not None
                published.append((user.user_id, user.version + 1, user.model))
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
