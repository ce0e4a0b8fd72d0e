"""Recomputing the users' models from the retained log into a fresh keyspace, to see how far
the live ones are from what the log says (``perso recompute``).

The events and decisions since ``since_ms`` are read from the live Redis in stream order
(every partition's two streams merged by id) and copied, with their ids, into a scratch
keyspace, with the item vectors they name; there the workers' own code applies them
(``StreamWorker``, drained with ``poll``) on a clock that follows the log, turn by turn
as the live loop takes them: a batch is what came within ``max_wait_ms`` of its first
entry (or ``batch_size`` entries), applied at the end of that wait, then the joins due by
then are closed; while idle, the loop wakes every second for the deferred events and the joins
that fell due. Up to the cut (when the recompute began). Then each user's record is compared
with the live one (``origin.worker.recompute_comparison``). Where the live batches were split
the same way, the models come out identical; where the traffic was split elsewhere, an
update may read the items' rates a batch earlier or later, and the models differ by that.

The live keyspace is only read. The cut is taken first, with what the live consumer group
has not applied yet; a user with an entry after the cut, or one the live workers had not
applied at it, or so close to it that it (or its join's closing) may have been applied on
the other side of it, is in flight and set apart.

Cost: the log since ``since_ms`` is read once (and the part before it once more, to find
whose history starts earlier), the scratch keyspace holds a copy of it, and every batch
costs the round trips a live batch does (about 100 a second on a sparse log, more entries
each on a busy one).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from config.settings import Settings
from origin.event_streams.streams import ensure_groups
from origin.exceptions import RecomputeError
from origin.learned.user_models import UserRecord, decode_record
from origin.worker.consumer import StreamWorker
from origin.worker.learning import Learning, learning
from origin.worker.recompute_comparison import (
    DEFAULT_TOLERANCE,
    Recomputed,
    Summary,
    UserComparison,
    classify,
    compare,
    summarise,
)
from origin.worker.retained_log import (
    LogEntry,
    closes_unsettled,
    complete_since,
    delivered_up_to,
    near_cut,
    observations_in,
    read_log,
    unapplied,
)
from protocol import keys
from protocol.exceptions import MalformedMessage
from redis_client.client import RedisClient

# Records read per pipeline.
RECORDS_CHUNK = 500
# The consumer name the recompute applies the log under, in the scratch keyspace.
CONSUMER = "recompute"
# How often an idle worker's loop wakes (its blocking read's timeout, ``StreamWorker``'s
# ``block_ms``) to apply deferred events and close joins that fell due meanwhile.
IDLE_TICK_MS = 1000


@dataclass(frozen=True)
class RecomputeConfig:
    partitions: int
    dim: int
    learning: Learning
    batch_size: int = 100
    max_wait_ms: int = 100
    # How far the live workers may trail: entries this close to the cut (a decision: plus
    # the reward grace, as it closes the user's earlier joins) are in flight.
    settle_s: float = 5.0
    tolerance: float = DEFAULT_TOLERANCE


def recompute_config(settings: Settings, *, settle_s: float, tolerance: float) -> RecomputeConfig:
    """The recompute of what the workers configured by ``settings`` did."""
    return RecomputeConfig(
        partitions=settings.event_partitions,
        dim=settings.embedding_dim,
        learning=learning(settings),
        batch_size=settings.worker_batch_size,
        max_wait_ms=settings.worker_max_wait_ms,
        settle_s=settle_s,
        tolerance=tolerance,
    )


# --- applying it -----------------------------------------------------------------------------


class LogClock:
    """The recompute's clock: the log's time, moved on by the recompute only."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, to_s: float) -> None:
        self.now = max(self.now, to_s)


class Applier:
    """Applies the log to the scratch keyspace with the workers' code, slice by slice."""

    def __init__(self, live: RedisClient, scratch: RedisClient, config: RecomputeConfig) -> None:
        self.live = live
        self.scratch = scratch
        self.config = config
        self.clock = LogClock()
        self.items: set[str] = set()  # item vectors copied
        self._slice: list[LogEntry] = []
        self._wakeups: list[float] = []  # when deferred events come due (s, a heap)
        self._idle_from = 0  # when the loop's last turn ended (ms): its idle ticks follow
        taught = config.learning
        self.worker = StreamWorker(
            scratch,
            partitions=config.partitions,
            dim=config.dim,
            consumer=CONSUMER,
            clock=self.clock,
            batch_size=config.batch_size,
            max_wait_ms=config.max_wait_ms,
            freshness=taught.freshness,
            posteriors=taught.posteriors,
            model=taught.model,
            joins=taught.joins,
        )

    async def start(self) -> None:
        if await self.scratch.dbsize():
            raise RecomputeError("the scratch keyspace is not empty: a recompute needs a fresh one")
        await ensure_groups(self.scratch, self.config.partitions)
        # The users' population prior the live workers update under now (one that moved
        # during the recomputed span makes the models differ by that).
        population = await self.live.get(keys.POPULATION_PRIOR)
        if population is not None:
            await self.scratch.set(keys.POPULATION_PRIOR, population)
            await self.worker.refresh_population()

    async def add(self, entry: LogEntry) -> None:
        """Take ``entry`` into the slice, applying the slice first when it is full."""
        if self._slice and (
            len(self._slice) >= self.config.batch_size
            or entry.at[0] - self._slice[0].at[0] > self.config.max_wait_ms
        ):
            await self._apply_slice(entry.at[0])
        self._slice.append(entry)

    async def finish(self, cut_ms: int) -> None:
        """Apply what is left, then what falls due up to the cut."""
        if self._slice:
            await self._apply_slice(cut_ms)
        await self._idle_until(cut_ms)

    async def _apply_slice(self, next_ms: int) -> None:
        """One batch, as the live loop takes it: waiting for its first entry (idle ticks
        meanwhile), collecting for ``max_wait_ms`` (or until ``batch_size``), applying it
        at the end of that wait and then closing the joins due by then."""
        entries, self._slice = self._slice, []
        first, last = entries[0].at[0], entries[-1].at[0]
        await self._idle_until(first)
        await self._copy_items(set().union(*(e.items for e in entries)))
        async with self.scratch.pipeline(transaction=False) as pipe:
            for e in entries:
                pipe.xadd(e.stream, cast(Any, e.fields), id=e.entry_id)
            await pipe.execute()
        full = len(entries) >= self.config.batch_size
        end = last if full else max(last, min(first + self.config.max_wait_ms, next_ms))
        self.clock.advance(end / 1000)
        await self._iteration(len(entries))
        self._idle_from = end

    async def _iteration(self, added: int = 0) -> None:
        """One turn of the worker's loop at the clock's time: the deferred events that are due
        and the ``added`` entries, applied; then the joins due closed. Notes when what is
        deferred now comes due."""
        worker = self.worker
        read = await worker.poll(">")
        while read < added:  # a partition had more than a read takes
            more = await worker.poll(">")
            if not more:
                break
            read += more
        await worker.joins.close_due(int(self.clock() * 1000))
        if worker.deferred:
            freshness = self.config.learning.freshness
            for delay in {freshness.active_delay_s, freshness.casual_delay_s} - {0.0}:
                heapq.heappush(self._wakeups, self.clock() + delay)

    async def _idle_until(self, to_ms: int) -> None:
        """The live loop, idle, wakes every ``IDLE_TICK_MS`` after its last batch to apply
        deferred events and close joins that fell due: the ticks before ``to_ms`` at which
        something did (the others change nothing) are run."""
        tick_ms = IDLE_TICK_MS
        while True:
            while self._wakeups and self._wakeups[0] * 1000 <= self._idle_from:
                heapq.heappop(self._wakeups)  # applied by the iteration that ran then
            moments = [w * 1000 for w in self._wakeups[:1]]
            due = await self._next_join_due()
            if due is not None:
                moments.append(due)
            if not moments:
                break
            ticks = max(1, math.ceil((min(moments) - self._idle_from) / tick_ms))
            tick = self._idle_from + ticks * tick_ms
            if tick >= to_ms:
                break  # the next batch comes first, and what is due waits for its turn
            self.clock.advance(tick / 1000)
            await self._iteration()
            self._idle_from = tick
        self.clock.advance(to_ms / 1000)

    async def _next_join_due(self) -> float | None:
        async with self.scratch.pipeline(transaction=False) as pipe:
            for p in range(self.config.partitions):
                pipe.zrange(keys.decisions_due(p), 0, 0, withscores=True)
            replies = await pipe.execute()
        scores = [float(score) for reply in replies for _, score in reply]
        return min(scores) if scores else None

    async def _copy_items(self, item_ids: set[str]) -> None:
        """The vectors of the items the slice names, before the worker reads (and caches)
        them."""
        missing = sorted(item_ids - self.items)
        if not missing:
            return
        async with self.live.pipeline(transaction=False) as pipe:
            for item_id in missing:
                pipe.get(keys.item_vector(item_id))
            vectors = await pipe.execute()
        async with self.scratch.pipeline(transaction=False) as pipe:
            for item_id, vector in zip(missing, vectors, strict=True):
                if vector is not None:
                    pipe.set(keys.item_vector(item_id), vector)
            await pipe.execute()
        self.items.update(missing)


# --- the recompute ------------------------------------------------------------------------------


@dataclass
class UserLog:
    """What the recomputed log holds of one user."""

    observations: set[int] = field(default_factory=set)
    in_flight: bool = False
    # When their decisions' joins fall due, for those due after the cut (give or take).
    dues_ms: list[int] = field(default_factory=list)


async def recompute(
    live: RedisClient,
    scratch: RedisClient,
    config: RecomputeConfig,
    *,
    since_ms: int,
    clock: Callable[[], float],
) -> tuple[Summary, list[UserComparison]]:
    """Recompute the live log since ``since_ms`` into ``scratch`` (an empty keyspace) and
    compare every user it taught with their live record."""
    cut_ms = int(clock() * 1000)
    pending = await unapplied(live, config.partitions)
    delivered = await delivered_up_to(live, config.partitions)
    from_start = await complete_since(live, config.partitions, since_ms)
    applier = Applier(live, scratch, config)
    await applier.start()
    settle_ms = int(config.settle_s * 1000)
    joins = config.learning.joins
    wait_ms, grace_ms = int(joins.wait_s * 1000), int(joins.grace_s * 1000)
    users: dict[str, UserLog] = {}
    events = decisions = 0
    async for entry in read_log(live, config.partitions, f"{since_ms}-0", str(cut_ms)):
        in_flight = (
            (entry.stream, entry.entry_id) in pending
            or entry.at > delivered[entry.stream]
            or near_cut(entry.at[0], entry.decision, cut_ms, settle_ms, grace_ms)
        )
        due_ms = entry.at[0] + wait_ms
        for user, observations in entry.users.items():
            log = users.setdefault(user, UserLog())
            log.observations |= observations
            log.in_flight |= in_flight
            if entry.decision and due_ms > cut_ms - settle_ms:
                log.dues_ms.append(due_ms)
        if entry.decision:
            decisions += entry.records
        else:
            events += entry.records
        await applier.add(entry)
    await applier.finish(cut_ms)
    # Whose history starts before --since; who has entries after the cut (what those
    # teach may be in the live record already: it is in the log, not trimmed).
    before = (
        set(await observations_in(live, config.partitions, "-", f"({since_ms}-0"))
        if since_ms
        else set()
    )
    after = await observations_in(live, config.partitions, f"{cut_ms + 1}-0", "+")
    read_ms = int(clock() * 1000)
    for user, log in users.items():
        log.observations |= after.get(user, set())
        log.in_flight |= user in after or any(
            closes_unsettled(due, cut_ms, read_ms, settle_ms) for due in log.dues_ms
        )
    comparisons = await _compare(live, scratch, config.dim, users, before)
    recomputed = Recomputed(since_ms, cut_ms, events, decisions, len(applier.items), from_start)
    return summarise(recomputed, comparisons, config.tolerance), comparisons


async def _compare(
    live: RedisClient,
    scratch: RedisClient,
    dim: int,
    users: dict[str, UserLog],
    before: set[str],
) -> list[UserComparison]:
    out: list[UserComparison] = []
    names = sorted(users)
    for start in range(0, len(names), RECORDS_CHUNK):
        chunk = names[start : start + RECORDS_CHUNK]
        live_records = await _records_of(live, chunk, dim)
        recomputed = await _records_of(scratch, chunk, dim)
        for user in chunk:
            mine, theirs = recomputed[user], live_records[user]
            if mine is None and theirs is None:
                continue  # nothing learnt on either side (views only)
            kind = classify(
                before_since=user in before,
                in_flight=users[user].in_flight,
                live=theirs,
                in_log=users[user].observations,
            )
            out.append(compare(user, kind, theirs, mine or UserRecord()))
    return out


async def _records_of(
    redis: RedisClient, users: Iterable[str], dim: int
) -> dict[str, UserRecord | None]:
    names = list(users)
    async with redis.pipeline(transaction=False) as pipe:
        for user in names:
            pipe.get(keys.user_record(user))
        raws = await pipe.execute()
    out: dict[str, UserRecord | None] = {}
    for user, raw in zip(names, raws, strict=True):
        try:
            out[user] = decode_record(raw, dim) if raw else None
        except MalformedMessage:
            out[user] = None
    return out
