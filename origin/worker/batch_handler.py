"""One batch of stream entries, handled for the stream worker (``origin.worker.consumer``):
decoded (an entry that is neither a decision nor an event is parked), the decisions opening
their joins and the feedback noted in its joins (``origin.worker.joins``), the engagements
and dismisses applied to their users' models (``origin.worker.batch``), then acknowledged.
While the worker is behind (``origin.worker.freshness_tiers``), events of active and casual
users are deferred for their tier's delay (``origin.worker.deferred``) and applied later
(``flush_deferred``). If applying a batch raises (a bug, a poison event), its entries are
retried one by one and the ones that still fail are parked with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from redis.exceptions import RedisError

from origin.event_streams.streams import StreamEntry, stream_id
from origin.exceptions import VersionConflict
from origin.learned.examination import ExaminationStore
from origin.learned.posteriors import PosteriorConfig, PosteriorStore
from origin.worker.batch import (
    BatchApplier,
    ModelConfig,
    Observation,
    Outcome,
    Published,
    WorkerStats,
)
from origin.worker.consumer_streams import ConsumerStreams
from origin.worker.deferred import Deferred, DeferredEvents
from origin.worker.freshness_tiers import FreshnessPolicy
from origin.worker.joins import JoinConfig, Joins
from protocol.actions import ENGAGED_ACTIONS
from protocol.api import Action
from protocol.decisions import Decision, decode_entry
from protocol.events import FeedbackEvent, decode_event
from protocol.exceptions import MalformedMessage
from redis_client.client import RedisClient

log = logging.getLogger(__name__)


class ApplyEvents(Protocol):
    """How a batch's events are applied to the users' models: the worker's ``process``
    (``BatchHandler.process`` unless a subclass of the worker overrides it)."""

    async def __call__(
        self, events: Sequence[FeedbackEvent], *, defer: bool = False
    ) -> dict[str, float]: ...


class BatchHandler:
    """What the worker's batches teach, applied: the item posteriors (``posteriors``), the
    users' models (``applier``), the decisions' joins (``joins``) and the events deferred
    (``deferring`` while the worker is behind)."""

    def __init__(
        self,
        redis: RedisClient,
        streams: ConsumerStreams,
        *,
        partitions: int,
        dim: int,
        clock: Callable[[], float],
        stats: WorkerStats,
        batch_size: int,
        posteriors: PosteriorConfig,
        model: ModelConfig,
        joins: JoinConfig,
        freshness: FreshnessPolicy,
        on_batch: Callable[[list[Published]], Awaitable[None]],
        apply: ApplyEvents,
    ) -> None:
        self._streams = streams
        self._apply = apply
        self._clock = clock
        self.stats = stats
        self._batch_size = batch_size
        self.posteriors = PosteriorStore(redis, posteriors)
        # ``on_batch`` is called after each written batch with (user, new version, model)
        # per user.
        self.applier = BatchApplier(
            redis,
            dim=dim,
            clock=clock,
            stats=stats,
            posteriors=self.posteriors,
            model=model,
            freshness=freshness,
            on_batch=on_batch,
        )
        self.joins = Joins(
            redis,
            partitions=partitions,
            posteriors=self.posteriors,
            examination=ExaminationStore(redis, clock),
            users=self.applier,
            config=joins,
        )
        # Interactions of active and casual users deferred by their freshness tier, while
        # the worker is behind (``deferring``).
        self._freshness = freshness
        self.deferred = DeferredEvents()
        self.deferring = False

    async def handle(self, entries: Sequence[StreamEntry]) -> None:
        """Apply a batch and acknowledge it. Redis failures propagate (the entries stay
        pending); any other failure is isolated to the entries that cause it."""
        self.stats.batches += 1
        self.stats.entries += len(entries)
        events: list[Deferred] = []
        decisions: list[Decision] = []
        for entry in entries:
            if entry.raw is None or self.deferred.defers(entry):
                continue
            try:
                if self._streams.holds_decisions(entry.stream):
                    decisions += decode_entry(entry.raw)
                    continue
                event = decode_event(entry.raw)
            except MalformedMessage as exc:
                await self._park(entry, Outcome.MALFORMED, str(exc))
                continue
            events.append((entry, event))
        self.stats.decisions += len(decisions)
        now_ms = int(self._clock() * 1000)
        self.deferring = self._freshness.defers(_behind_s(entries, now_ms))
        await self.joins.open(decisions, now_ms)
        await self.joins.note([event for _, event in events], now_ms)
        await self.joins.unjoined([event for _, event in events], now_ms)
        fresh: list[Deferred] = []
        for entry, event in events:
            if event.user_id in self.deferred:  # keep the user's order: behind what is deferred
                self.deferred.defer(entry, event, due=self._clock())
            else:
                fresh.append((entry, event))
        events = fresh
        delays = await self._process_isolated(events, defer=self.deferring)
        for entry, event in events:
            delay = delays.get(event.user_id)
            if delay is not None:
                self.deferred.defer(entry, event, due=self._clock() + delay)
        await self._streams.ack([e for e in entries if not self.deferred.defers(e)])

    async def flush_deferred(self, *, everything: bool = False) -> int:
        """Apply the deferred interactions whose tier delay is over (all of them with
        ``everything``, or once the worker is no longer behind), a batch's worth of users
        at a time (``batch_size``: the worker reads new entries between two), then
        acknowledge them; returns how many."""
        due = self.deferred.due(
            self._clock(),
            everything=everything or not self.deferring,
            limit=self._batch_size,
        )
        if not due:
            return 0
        due_events = self.deferred.of(due)
        await self._process_isolated(due_events, defer=False)
        self.deferred.release(due)
        await self._streams.ack([entry for entry, _ in due_events])
        return len(due_events)

    async def _process_isolated(
        self, events: Sequence[Deferred], *, defer: bool
    ) -> dict[str, float]:
        """Apply the events (``apply``); if that raises (not Redis), one by one, parking those
        that still fail. Returns the users deferred with their delays."""
        try:
            return await self._apply([event for _, event in events], defer=defer)
        except (RedisError, VersionConflict):
            raise
        except Exception:
            log.exception("a batch of %d events failed; applying them one by one", len(events))
        delays: dict[str, float] = {}
        for entry, event in events:
            try:
                delays.update(await self._apply([event], defer=defer))
            except (RedisError, VersionConflict):
                raise
            except Exception as exc:  # a bug or a poison event: park it
                await self._park(entry, Outcome.FAILED, repr(exc))
        return delays

    async def process(
        self, events: Sequence[FeedbackEvent], *, defer: bool = False
    ) -> dict[str, float]:
        """Apply what ``events`` teach the users' models (``BatchApplier.process``);
        returns the users deferred. A view teaches nothing."""
        observations = []
        for e in events:
            engaged = e.action in ENGAGED_ACTIONS
            if not engaged and e.action != Action.DISMISS:
                self.stats.outcomes[Outcome.NO_CHANGE] += 1
                continue
            observations.append(
                Observation(
                    e.user_id, e.item_id, engaged, 1.0, e.interaction_id, e.accepted_ms, True
                )
            )
        return await self.applier.process(observations, defer=defer)

    async def _park(self, entry: StreamEntry, outcome: Outcome, reason: str) -> None:
        """An entry that can never be applied goes to the partition's dead-letter stream
        with the reason, so that it neither blocks the partition nor is lost."""
        self.stats.outcomes[outcome] += 1
        log.warning("dead-lettering %s of %s: %s", entry.entry_id, entry.stream, reason)
        await self._streams.park(entry, reason)


def _behind_s(entries: Sequence[StreamEntry], now_ms: int) -> float:
    """How far behind the oldest of ``entries`` is, in seconds: its stream id's time (when
    it was appended) against ``now_ms``."""
    oldest = min((stream_id(e.entry_id)[0] for e in entries), default=now_ms)
    return max(0.0, (now_ms - oldest) / 1000)
