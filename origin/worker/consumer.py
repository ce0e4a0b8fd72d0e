"""The stream worker: feedback events and decisions in, what they teach out, in
micro-batches.

Reads every ``events:{p}`` and ``decisions:{p}`` partition through the ``embedder``
consumer group, partition by partition (``origin.worker.partition_reads``: a partition's
streams share one hash slot, as a Redis Cluster needs), and gathers up to ``batch_size``
entries or ``max_wait_ms`` worth of them (micro-batching: 100 updates or 100 ms,
whichever first). A batch is decoded
(an entry that is neither is parked in ``events:{p}:dead``), then:

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
older than the policy's overload lag), events of active and casual users are held for their
freshness tier's delay, pending in Redis, with the claim on them renewed; once it has
caught up, what it holds is applied a batch's worth of users before each read. If applying
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
from origin.event_streams.streams import StreamEntry, consumer_lag_ms, ensure_groups, stream_id
from origin.exceptions import VersionConflict
from origin.learned.examination import ExaminationStore
from origin.learned.population import PopulationStore
from origin.learned.posteriors import PosteriorConfig, PosteriorStore
from origin.worker.batch import (
    BatchApplier,
    ModelConfig,
    Observation,
    Outcome,
    Published,
    WorkerStats,
)
from origin.worker.figures import figures_of, publish_figures
from origin.worker.freshness_tiers import REAL_TIME, FreshnessPolicy
from origin.worker.held import Held, HeldEvents
from origin.worker.joins import JoinConfig, Joins
from origin.worker.partition_reads import PartitionReaders, read_now
from origin.worker.population import PopulationSample, reestimate
from origin.worker.retention import LogRetention, LogTrimmer
from origin.worker.totals import WorkerTotals, run_counters
from protocol import keys
from protocol.actions import ENGAGED_ACTIONS
from protocol.api import Action
from protocol.decisions import DECISION_FIELD, Decision, decode_entry
from protocol.events import EVENT_FIELD, FeedbackEvent, decode_event
from protocol.exceptions import MalformedMessage
from redis_client.client import RedisClient
from redis_client.durable import Durability
from resilience.backoff import Backoff

log = logging.getLogger(__name__)

# Pause after a Redis failure, doubling up to this.
MAX_BACKOFF_S = 5.0


class EmbeddingWorker:
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
        # Replicas that must hold what a batch wrote before it is acknowledged.
        self._durability = durability
        self._event_streams = keys.events_streams(partitions)
        decision_streams = keys.decisions_streams(partitions)
        self._decision_streams = set(decision_streams)
        self._streams = [*self._event_streams, *decision_streams]
        self._partition_of = {
            stream: p
            for streams in (self._event_streams, decision_streams)
            for p, stream in enumerate(streams)
        }
        self._field_of = {s: self._field_of_stream(s) for s in self._streams}
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
        # Trimming is a singleton job: every worker campaigns at each upkeep, the elected
        # one trims. The lease outlives two missed upkeeps and a late loop (a blocking read,
        # a batch); were it to lapse anyway, a trim is only skipped or done twice, both
        # harmless.
        self.trimmer = (
            trimmer
            if trimmer is not None
            else LeaderElection(
                RedisLock(redis, clock),
                keys.STREAM_TRIMMER,
                lease_ttl_ms(self._upkeep_s, slack_s=(block_ms + max_wait_ms) / 1000),
                renew_every_s=self._upkeep_s,
            )
        )
        # What the elected trimmer keeps of the logs.
        self.retention = LogTrimmer(redis, partitions, retention)
        self.stats = WorkerStats()
        # This run's counters add up with every other run of the consumer name's.
        self._totals = WorkerTotals(
            redis, consumer, run_id if run_id is not None else secrets.token_hex(8)
        )
        # ``on_batch`` is called after each written batch with (user, new version, model)
        # per user: the Qdrant mirror, and the publish hook toward the edges.
        store = PosteriorStore(redis, posteriors)
        self._store = store
        # The population prior (``origin.worker.population``): read at every upkeep, and
        # re-estimated every ``population_every_s`` (0: never) by the elected worker from
        # the users this one updated lately.
        self._population = PopulationStore(redis, clock)
        self._sample = PopulationSample()
        self._population_every_s = population_every_s
        self._population_rank = population_rank
        self._population_due = 0.0
        self._learnt_var = model.prior_scale / dim

        async def published(updates: list[Published]) -> None:
            self._sample.observe(updates)
            if on_batch is not None:
                await on_batch(updates)

        # Called with the (cell, item) pairs whose posteriors changed, after each batch and
        # each close: the publish hook toward the edges (``origin.worker.item_updates``).
        self._on_items = on_items
        self._applier = BatchApplier(
            redis,
            dim=dim,
            clock=clock,
            stats=self.stats,
            posteriors=store,
            model=model,
            freshness=freshness,
            on_batch=published,
        )
        self.joins = Joins(
            redis,
            partitions=partitions,
            posteriors=store,
            examination=ExaminationStore(redis, clock),
            users=self._applier,
            config=joins,
        )
        # Interactions of active and casual users held back by their freshness tier, while
        # the worker is behind (``holding``).
        self._freshness = freshness
        self._held = HeldEvents()
        self.holding = False
        # While ``run`` runs: a blocking reader per partition (``poll`` reads without them).
        self._readers = PartitionReaders(
            redis,
            consumer,
            range(partitions),
            count=batch_size,
            block_ms=block_ms,
            field_of=self._field_of,
        )

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
                        await ensure_groups(self._redis, self._partitions)
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
        read once each (a cursor per stream: entries it holds stay pending, and must not be
        read again and again). Returns how many were read."""
        cursors: dict[str, str] = dict.fromkeys(self._streams, "0")
        total = 0
        while cursors:
            entries = await self._read_from(cursors)
            if not entries:
                return total
            await self.handle(entries)
            total += len(entries)
            done = set(cursors)
            for entry in entries:
                cursors[entry.stream] = entry.entry_id.decode()
                done.discard(entry.stream)
            for stream in done:  # nothing more pending there
                del cursors[stream]
        return total

    @property
    def held(self) -> int:
        """Entries held back by the freshness tiers."""
        return len(self._held)

    async def upkeep(self) -> None:
        """Keep the lease on held entries, reclaim stale pending entries, trim the logs to
        their retention (the elected trimmer only), publish the figures."""
        await self._renew_held()
        await self.reclaim()
        if await self.trimmer.keep_or_campaign():
            trimmed = await self.retention.trim(int(self._clock() * 1000))
            self.stats.trimmed += trimmed.removed
            self.stats.retention_held += len(trimmed.held)
            await self._reestimate_population()
        await self.refresh_population()
        await self.publish_stats()

    async def refresh_population(self) -> None:
        """Update users under the population prior stored now (``upkeep`` does it; a
        replay, which only polls, once at its start)."""
        self._applier.population = await self._population.current()

    async def _reestimate_population(self) -> None:
        """The elected worker's re-estimate of the population prior, when it is due."""
        now = self._clock()
        if self._population_every_s <= 0 or now < self._population_due:
            return
        self._population_due = now + self._population_every_s
        estimated = await reestimate(
            self._population,
            self._sample,
            dim=self._dim,
            learnt_var=self._learnt_var,
            rank=self._population_rank,
        )
        if estimated is not None:
            self.stats.population_version = estimated.version

    async def publish_stats(self) -> None:
        """The worker's figures in ``worker:{consumer}:stats`` (expiring if it dies), and
        what its counters grew by since the last publish added to the consumer name's
        totals (``origin.worker.totals``)."""
        lag_ms = 0
        for stream in self._event_streams:
            lag_ms = max(lag_ms, await consumer_lag_ms(self._redis, stream))
        counters = run_counters(self.stats)
        figures = figures_of(
            self.stats,
            counters,
            trimmer=self.trimmer.is_leader,
            held=self.held,
            lag_ms=lag_ms,
            now_ms=int(self._clock() * 1000),
        )
        await publish_figures(self._redis, self._consumer, figures)
        await self._totals.publish(counters)

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
                field = self._field_of[stream]
                entries = [
                    StreamEntry(stream, entry_id, (fields or {}).get(field) if fields else None)
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
        """Read what is there now, without waiting (``">"``: new entries; ``"0"``: this
        consumer's pending entries; up to ``batch_size`` per partition) and apply it;
        returns the number of entries handled. ``run`` reads through its partition
        readers instead."""
        await self.flush_held()
        entries = await self._read_from(dict.fromkeys(self._streams, position))
        if entries:
            await self.handle(entries)
            await self.publish_items()
        return len(entries)

    async def publish_items(self) -> None:
        """Hand the items whose posteriors changed since the last call to ``on_items``."""
        touched = self._store.drain_touched()
        if touched and self._on_items is not None:
            await self._on_items(touched)

    async def _next_batch(self) -> int:
        """One batch from the partition readers: the first read within ``block_ms``, then
        more until ``batch_size`` entries or ``max_wait_ms`` after the first; applied."""
        await self.flush_held()
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

    async def _read_from(self, positions: dict[str, str]) -> list[StreamEntry]:
        return await read_now(
            self._redis,
            self._consumer,
            positions,
            count=self._batch_size,
            field_of=self._field_of,
            partition_of=self._partition_of,
        )

    def _field_of_stream(self, stream: str) -> bytes:
        return DECISION_FIELD if stream in self._decision_streams else EVENT_FIELD

    # --- one batch -------------------------------------------------------------------------

    async def handle(self, entries: Sequence[StreamEntry]) -> None:
        """Apply a batch and acknowledge it. Redis failures propagate (the entries stay
        pending); any other failure is isolated to the entries that cause it."""
        self.stats.batches += 1
        self.stats.entries += len(entries)
        events: list[Held] = []
        decisions: list[Decision] = []
        for entry in entries:
            if entry.raw is None or self._held.holds(entry):
                continue
            try:
                if entry.stream in self._decision_streams:
                    decisions += decode_entry(entry.raw)
                    continue
                event = decode_event(entry.raw)
            except MalformedMessage as exc:
                await self._park(entry, Outcome.MALFORMED, str(exc))
                continue
            events.append((entry, event))
        self.stats.decisions += len(decisions)
        now_ms = int(self._clock() * 1000)
        self.holding = self._freshness.holds(_behind_s(entries, now_ms))
        await self.joins.open(decisions, now_ms)
        await self.joins.note([event for _, event in events], now_ms)
        await self.joins.unjoined([event for _, event in events], now_ms)
        fresh: list[Held] = []
        for entry, event in events:
            if event.user_id in self._held:  # keep the user's order: behind what is held
                self._held.hold(entry, event, due=self._clock())
            else:
                fresh.append((entry, event))
        events = fresh
        delays = await self._process_isolated(events, hold=self.holding)
        for entry, event in events:
            delay = delays.get(event.user_id)
            if delay is not None:
                self._held.hold(entry, event, due=self._clock() + delay)
        await self._ack([e for e in entries if not self._held.holds(e)])

    async def flush_held(self, *, everything: bool = False) -> int:
        """Apply the held interactions whose tier delay is over (all of them with
        ``everything``, or once the worker is no longer behind), a batch's worth of users
        at a time (``batch_size``: the worker reads new entries between two), then
        acknowledge them; returns how many."""
        due = self._held.due(
            self._clock(),
            everything=everything or not self.holding,
            limit=self._batch_size,
        )
        if not due:
            return 0
        held = self._held.of(due)
        await self._process_isolated(held, hold=False)
        self._held.release(due)
        await self._ack([entry for entry, _ in held])
        return len(held)

    async def _renew_held(self) -> None:
        """Claim held entries again (idle time back to 0), so that no other worker takes
        them for a dead worker's."""
        for stream, ids in self._held.by_stream().items():
            await self._redis.xclaim(
                stream, keys.EMBEDDER_GROUP, self._consumer, 0, list(ids), justid=True
            )

    async def _process_isolated(self, events: Sequence[Held], *, hold: bool) -> dict[str, float]:
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
        """Apply what ``events`` teach the users' models (``BatchApplier.process``);
        returns the users held back. A view teaches nothing."""
        observations = []
        for e in events:
            engaged = e.action in ENGAGED_ACTIONS
            if not engaged and e.action != Action.DISMISS:
                self.outcomes[Outcome.NO_CHANGE] += 1
                continue
            observations.append(
                Observation(
                    e.user_id, e.item_id, engaged, 1.0, e.interaction_id, e.accepted_ms, True
                )
            )
        return await self._applier.process(observations, hold=hold)

    def forget_items(self) -> None:
        """Drop cached item vectors (after a catalog change)."""
        self._applier.forget_items()

    async def _ack(self, entries: Sequence[StreamEntry]) -> None:
        """Acknowledge ``entries``, once what applying them wrote is on the replicas that
        must hold it (``redis_client.durable``: a failover must not undo what an entry
        taught after the entry left the pending list)."""
        if not entries:
            return
        await self._durability.barrier(self._redis, keys.replication_barrier)
        by_stream: dict[str, list[bytes]] = {}
        for entry in entries:
            by_stream.setdefault(entry.stream, []).append(entry.entry_id)
        async with self._redis.pipeline(transaction=False) as pipe:
            for stream, ids in by_stream.items():
                pipe.xack(stream, keys.EMBEDDER_GROUP, *ids)
            await pipe.execute()

    async def _park(self, entry: StreamEntry, outcome: Outcome, reason: str) -> None:
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


def _behind_s(entries: Sequence[StreamEntry], now_ms: int) -> float:
    """How far behind the oldest of ``entries`` is, in seconds: its stream id's time (when
    it was appended) against ``now_ms``."""
    oldest = min((stream_id(e.entry_id)[0] for e in entries), default=now_ms)
    return max(0.0, (now_ms - oldest) / 1000)
