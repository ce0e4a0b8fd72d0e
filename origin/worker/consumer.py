"""The stream worker: feedback events and decisions in, what they teach out, in
micro-batches.

Reads every ``events:{p}`` and ``decisions:{p}`` partition through the ``embedder``
consumer group (``origin.worker.consumer_streams``), partition by partition
(``origin.worker.partition_reads``: a partition's streams share one hash slot, as a Redis
Cluster needs), and gathers up to ``batch_size`` entries or ``max_wait_ms`` worth of them
(micro-batching: 100 updates or 100 ms, whichever first). A batch
(``origin.worker.batch_handler``) is decoded (an entry that is neither is parked in
``events:{p}:dead``), then:

- decisions open their joins (``origin.worker.joins``);
- feedback for a served answer (a ``request_id``) is noted in its join; feedback without
  one teaches the item's all-context posterior directly;
- engagements and dismisses move their user's model at once (``origin.worker.batch``,
  compare-and-set per user), so a click is learnt within the batch;

and only then is it acknowledged, so a worker killed mid-batch leaves it pending; another
worker reclaims it (XAUTOCLAIM after ``claim_idle_ms``), and the users' windows of applied
observations and the posteriors' marks make a second application a no-op: at-least-once
delivery, exactly-once effect. Between batches, the joins whose reward window is over are
closed (the non-engagements of what was shown; ``Joins.close_due``).

While the worker is behind (``origin.worker.freshness_tiers``: the entries it reads are
older than the policy's overload lag), events of active and casual users are deferred for their
freshness tier's delay, pending in Redis, with the claim on them renewed; once it has
caught up, what it defers is applied a batch's worth of users before each read. If applying
a batch raises (a bug, a poison event), its entries are retried one by one and the ones
that still fail are parked with the reason; Redis failures are retried.

Trimming the logs to their retention (``origin.worker.retention``: by age and size, never
past what the group still needs) is a singleton job: the workers elect one trimmer
(``coordination.leader``, resource ``keys.STREAM_TRIMMER``) and the others skip it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

from redis.exceptions import RedisError

from coordination.leader import LeaderElection, lease_ttl_ms
from coordination.redis_lock import RedisLock
from origin.event_streams.streams import StreamEntry
from origin.exceptions import VersionConflict
from origin.learned.posteriors import PosteriorConfig
from origin.worker.batch import ModelConfig, Outcome, Published, WorkerStats
from origin.worker.batch_handler import BatchHandler
from origin.worker.consumer_streams import ConsumerStreams
from origin.worker.figures import figures_of, publish_figures
from origin.worker.freshness_tiers import REAL_TIME, FreshnessPolicy
from origin.worker.joins import JoinConfig, Joins
from origin.worker.population_upkeep import PopulationUpkeep
from origin.worker.retention import LogRetention, LogTrimmer
from origin.worker.totals import WorkerTotals, run_counters
from protocol import keys
from protocol.events import FeedbackEvent
from redis_client.client import RedisClient
from redis_client.durable import Durability
from resilience.backoff import Backoff

log = logging.getLogger(__name__)

# Pause after a Redis failure, doubling up to this.
MAX_BACKOFF_S = 5.0


class StreamWorker:
    """A stream worker (the module's docstring). Its hooks: ``on_batch`` is called after
    each written batch with (user, new version, model) per user: the Qdrant mirror, and the
    publish hook toward the edges; ``on_items`` with the (cell, item) pairs whose posteriors
    changed, after each batch and each close: the publish hook toward the edges
    (``origin.worker.item_updates``)."""

    def __init__(
        self,
        redis: RedisClient,
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
        on_items: Callable[[set[tuple[str, str]]], Awaitable[None]] | None = None,
        freshness: FreshnessPolicy = REAL_TIME,
        trimmer: LeaderElection | None = None,
        run_id: str | None = None,
        posteriors: PosteriorConfig = PosteriorConfig(),  # noqa: B008 - frozen
        model: ModelConfig = ModelConfig(),  # noqa: B008 - frozen
        joins: JoinConfig = JoinConfig(),  # noqa: B008 - frozen
        retention: LogRetention = LogRetention(),  # noqa: B008 - frozen
        durability: Durability = Durability(),  # noqa: B008 - frozen
        population_every_s: float = 0.0,
        population_rank: int = 0,
    ) -> None:
        self._redis = redis
        self._streams = ConsumerStreams(
            redis,
            partitions,
            consumer,
            count=batch_size,
            claim_idle_ms=claim_idle_ms,
            durability=durability,
        )
        self._consumer = consumer
        self._clock = clock
        self._block_ms = block_ms
        self._batch_size = batch_size
        self._max_wait_ms = max_wait_ms
        # Reclaiming, trimming and publishing figures: often enough that a dead worker's
        # entries wait little more than ``claim_idle_ms``.
        self._upkeep_s = min(5.0, max(0.05, claim_idle_ms / 2000))
        self.trimmer = trimmer or _trimmer_election(
            redis, clock, self._upkeep_s, slack_s=(block_ms + max_wait_ms) / 1000
        )
        # What the elected trimmer keeps of the logs.
        self.retention = LogTrimmer(redis, partitions, retention)
        self.stats = WorkerStats()
        # This run's counters add up with every other run of the consumer name's.
        self._totals = WorkerTotals(
            redis, consumer, run_id if run_id is not None else secrets.token_hex(8)
        )
        self._population = PopulationUpkeep(
            redis,
            clock,
            dim=dim,
            learnt_var=model.prior_scale / dim,
            every_s=population_every_s,
            rank=population_rank,
        )
        self._batches = BatchHandler(
            redis,
            self._streams,
            partitions=partitions,
            dim=dim,
            clock=clock,
            stats=self.stats,
            batch_size=batch_size,
            posteriors=posteriors,
            model=model,
            joins=joins,
            freshness=freshness,
            on_batch=self._population.observing(on_batch),
            apply=self.process,
        )
        self._on_items = on_items
        # While ``run`` runs: a blocking reader per partition (``poll`` reads without them).
        self._readers = self._streams.blocking_readers(block_ms)

    @property
    def joins(self) -> Joins:
        """The decisions' joins (``origin.worker.joins``)."""
        return self._batches.joins

    @property
    def outcomes(self) -> Counter[Outcome]:
        return self.stats.outcomes

    # --- the loop ------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Poll until ``stop`` is set; the batch in hand is finished first (graceful
        shutdown). A Redis failure (lost connection, a consumer group gone after a flush)
        or a run of version conflicts leaves the entries pending; after a back-off the
        worker recreates missing groups and re-reads its own and stale pending entries.
        On the way out the worker publishes its last figures (so the totals have all of
        them) and resigns as the stream trimmer."""
        try:
            await self._run(stop)
            with contextlib.suppress(RedisError):
                await self.publish_stats()
        finally:
            await self.trimmer.resign()  # the next trimmer need not wait for the lease

    async def _run(self, stop: asyncio.Event) -> None:
        backoff = Backoff(base_s=0.1, cap_s=MAX_BACKOFF_S)
        recovering = True
        next_upkeep = 0.0
        readers_stop = asyncio.Event()
        readers: asyncio.Task[None] | None = None
        try:
            while not stop.is_set():
                try:
                    if recovering:
                        await self._streams.ensure_groups()
                        await self.drain_own_pending()
                        recovering = False
                    if readers is None:  # after the groups exist and the own pending is read
                        readers = asyncio.create_task(self._readers.run(readers_stop))
                    if time.monotonic() >= next_upkeep:
                        await self.upkeep()
                        next_upkeep = time.monotonic() + self._upkeep_s
                    await self._next_batch()
                    await self.joins.close_due(int(self._clock() * 1000))
                    await self.publish_items()
                    backoff.reset()
                except (RedisError, VersionConflict) as exc:
                    pause = backoff.next()
                    log.warning("worker %s: %s; retrying in %.1fs", self._consumer, exc, pause)
                    recovering = True
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), pause)
        finally:
            readers_stop.set()
            if readers is not None:
                await self._last_batches(readers)

    async def _last_batches(self, readers: asyncio.Task[None]) -> None:
        """Apply what the readers read until they stopped: they return within their block
        time once told, and a reader waiting for room in the queue needs it taken."""
        try:
            while not readers.done():
                entries = await self._readers.take(0.05, self._batch_size)
                if entries:
                    await self.handle(entries)
            entries = self._readers.take_ready()
            if entries:
                await self.handle(entries)
        except (RedisError, VersionConflict) as exc:
            # Left pending: this consumer's next start, or another worker, applies them.
            log.warning("worker %s: last batch not applied: %s", self._consumer, exc)
        finally:
            if not readers.done():
                readers.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await readers

    async def drain_own_pending(self) -> int:
        """Entries delivered to this consumer name before a restart and never acknowledged,
        applied (``ConsumerStreams.drain_own_pending``); returns how many were read."""
        return await self._streams.drain_own_pending(self.handle)

    @property
    def deferred(self) -> int:
        """Entries deferred by the freshness tiers."""
        return len(self._batches.deferred)

    async def upkeep(self) -> None:
        """Keep the lease on deferred entries, reclaim stale pending entries, trim the logs to
        their retention (the elected trimmer only), publish the figures."""
        await self._streams.renew(self._batches.deferred.by_stream())
        await self.reclaim()
        if await self.trimmer.keep_or_campaign():
            trimmed = await self.retention.trim(int(self._clock() * 1000))
            self.stats.trimmed += trimmed.removed
            self.stats.retention_spared += len(trimmed.spared)
            estimated = await self._population.reestimate()
            if estimated is not None:
                self.stats.population_version = estimated.version
        await self.refresh_population()
        await self.publish_stats()

    async def refresh_population(self) -> None:
        """Update users under the population prior stored now (``upkeep`` does it; a
        replay, which only polls, once at its start)."""
        self._batches.applier.population = await self._population.current()

    async def publish_stats(self) -> None:
        """The worker's figures in ``worker:{consumer}:stats`` (expiring if it dies), and
        what its counters grew by since the last publish added to the consumer name's
        totals (``origin.worker.totals``)."""
        lag_ms = await self._streams.lag_ms()
        counters = run_counters(self.stats)
        figures = figures_of(
            self.stats,
            counters,
            trimmer=self.trimmer.is_leader,
            deferred=self.deferred,
            lag_ms=lag_ms,
            now_ms=int(self._clock() * 1000),
        )
        await publish_figures(self._redis, self._consumer, figures)
        await self._totals.publish(counters)

    async def reclaim(self) -> int:
        """Take over entries other consumers read but have not acknowledged for
        ``claim_idle_ms`` (a worker that died mid-batch), and apply them."""
        total = await self._streams.reclaim(self.handle)
        self.stats.reclaimed += total
        return total

    async def poll(self, position: str) -> int:
        """Read what is there now, without waiting (``">"``: new entries; ``"0"``: this
        consumer's pending entries; up to ``batch_size`` per partition) and apply it;
        returns the number of entries handled. ``run`` reads through its partition
        readers instead."""
        await self.flush_deferred()
        entries = await self._streams.read_now(dict.fromkeys(self._streams.names, position))
        if entries:
            await self.handle(entries)
            await self.publish_items()
        return len(entries)

    async def publish_items(self) -> None:
        """Hand the items whose posteriors changed since the last call to ``on_items``."""
        touched = self._batches.posteriors.drain_touched()
        if touched and self._on_items is not None:
            await self._on_items(touched)

    async def _next_batch(self) -> int:
        """One batch from the partition readers: the first read within ``block_ms``, then
        more until ``batch_size`` entries or ``max_wait_ms`` after the first; applied."""
        await self.flush_deferred()
        entries = await self._readers.take(self._block_ms / 1000, self._batch_size)
        if entries and len(entries) < self._batch_size:
            deadline = time.monotonic() + self._max_wait_ms / 1000
            while len(entries) < self._batch_size:
                left_s = deadline - time.monotonic()
                if left_s <= 0:
                    break
                more = await self._readers.take(left_s, self._batch_size - len(entries))
                if not more:
                    break
                entries.extend(more)
        if entries:
            await self.handle(entries)
        return len(entries)

    # --- one batch (``origin.worker.batch_handler``) ---------------------------------------

    async def handle(self, entries: Sequence[StreamEntry]) -> None:
        """Apply a batch and acknowledge it (``BatchHandler.handle``)."""
        await self._batches.handle(entries)

    async def flush_deferred(self, *, everything: bool = False) -> int:
        """Apply the deferred interactions that are due (``BatchHandler.flush_deferred``)."""
        return await self._batches.flush_deferred(everything=everything)

    async def process(
        self, events: Sequence[FeedbackEvent], *, defer: bool = False
    ) -> dict[str, float]:
        """Apply what ``events`` teach the users' models (``BatchHandler.process``)."""
        return await self._batches.process(events, defer=defer)

    @property
    def deferring(self) -> bool:
        """Whether the worker is behind: events of active and casual users are deferred."""
        return self._batches.deferring

    def forget_items(self) -> None:
        """Drop cached item vectors (after a catalog change)."""
        self._batches.applier.forget_items()


def _trimmer_election(
    redis: RedisClient, clock: Callable[[], float], upkeep_s: float, *, slack_s: float
) -> LeaderElection:
    """The election of the stream trimmer, a singleton job: every worker campaigns at each
    upkeep, the elected one trims. The lease outlives two missed upkeeps and a late loop (a
    blocking read, a batch: ``slack_s``); were it to lapse anyway, a trim is only skipped or
    done twice, both harmless."""
    return LeaderElection(
        RedisLock(redis, clock),
        keys.STREAM_TRIMMER,
        lease_ttl_ms(upkeep_s, slack_s=slack_s),
        renew_every_s=upkeep_s,
    )
