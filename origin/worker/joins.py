"""Rewards joined to decisions (Personalizer's reward wait time): what each shown item of a
served answer taught, counted as soon as it is known.

A decision (``protocol.decisions``) opens a join: ``u:{user}:dec:<request_id>`` holds the
record, and every engagement or dismiss the feedback reports for that request id is added
to it as it arrives, in either order (an edge logs its decisions in batches, a click may
come first).

The items learn at once, not when the join closes. When the decision comes, every shown item
counts as what it is so far (``impressions``): a failure weighted by the chance that its
position was examined given no engagement (``relevance.examination.miss_weight``, the
weight kept in the join), a success when its engagement came first, a whole failure when
its dismiss did. An engagement that comes later converts its item's impression into a
success (the weight taken back), a dismiss makes it a whole failure, and a better action on
an engaged item (a purchase after the click) adds the difference of grades to the item's
value. An item's posterior so never waits for the reward window: were the failures
counted only at the close, every edge and origin would keep ranking an item shown a
thousand times in the last thirty seconds as if nobody had been shown it (measured on the
family of ``benchmarks.learning``'s shops: this delay alone cost more learning than any
other part of the loop). A decision whose record never comes teaches the engagements
reported for it at the close, for all contexts (the decision log is best effort).

The join closes when its reward window is over (``PERSO_REWARD_WAIT_S`` after it was
served), or, earlier, ``PERSO_REWARD_GRACE_S`` after the same user's next decision (they
moved on). Then:

- each item left alone is a negative for the user's model, of the weight its impression
  counted (engagements and dismisses reach the user's model when their event is read,
  ``origin.worker.batch_handler``, so a click is learnt at once and a dismiss once);
- the position-bias tally gets the decision's expected examinations;
- what the decision earned is appended to the reward log (``protocol.rewards``,
  ``rewards:{p}``), for offline evaluation.

Exactly once: the impressions are added under the decision's impression mark
(``impression_mark``), a conversion under the item's in that decision
(``conversion_mark``: however many actions report the item, it converts once), a gain of
grade under the interaction's id; a worker claims the due joins it closes for ``CLAIM_S``
(another worker closes none of them meanwhile); the user's model takes the close under the
closing's observation id (its window), and the join becomes a tombstone last (its context
cell, its impressions' weights and what was counted, for late feedback); a worker that dies
mid-close leaves it claimed, and once the claim is over its successor repeats what is
missing and nothing else (a join found closed already is only tidied up). A join opened
before impressions were counted at once (a join of an older worker) is learnt from at its
close, as it used to be.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from origin.learned.examination import ExaminationStore
from origin.learned.posteriors import (
    ALL_CONTEXTS,
    ItemOutcome,
    PosteriorStore,
)
from origin.worker.batch import BatchApplier, Observation
from origin.worker.join_lessons import (
    Closed,
    closing_id,
    curve_point,
    impression_mark,
    impressions,
    noted_lesson,
    outcomes,
    queue_curve,
)
from origin.worker.join_record import (
    CLAIM,
    CLOSED,
    DECISION,
    NOTE,
    OPEN,
    SEP,
    UNDECIDED,
    JoinRecord,
    as_text,
    field_of,
    kept_weights,
    member_of,
    parse_join,
)
from origin.worker.reward_log import queue_rewards
from protocol import keys
from protocol.actions import ENGAGED_ACTIONS, grade_of
from protocol.api import Action
from protocol.decisions import Decision, encode_decision
from protocol.events import FeedbackEvent
from redis_client.client import RedisClient, RedisPipeline, queue_script
from relevance.examination import Tally, at, miss_weight

# A join no worker ever closed (all of them gone for a day) expires.
JOIN_TTL_S = 86_400
# How long a closed join keeps its context cell for a late click.
CLOSED_TTL_S = 3_600
# How many due joins one call closes at most.
CLOSE_BATCH = 200
# How long a worker has to close the due joins it claimed before another may.
CLAIM_S = 60.0


@dataclass(frozen=True)
class JoinConfig:
    wait_s: float = 30.0  # a decision's reward window
    grace_s: float = 2.0  # after the user's next decision: they moved on
    # The reward log's retention, as the decision log's (``PERSO_DECISION_RETENTION_*``).
    retention_s: float = 604_800.0
    retention_entries: int = 200_000


class Joins:
    """The joins of the decisions and feedback a worker reads."""

    def __init__(
        self,
        redis: RedisClient,
        *,
        partitions: int,
        posteriors: PosteriorStore,
        examination: ExaminationStore,
        users: BatchApplier,
        config: JoinConfig,
    ) -> None:
        self._redis = redis
        self._partitions = partitions
        self._posteriors = posteriors
        self._examination = examination
        self._users = users
        self._config = config
        self._note = redis.register_script(NOTE)
        self._open = redis.register_script(OPEN)
        self._claim = redis.register_script(CLAIM)

    async def open(self, decisions: Sequence[Decision], now_ms: int) -> None:
        """Record each decision for its join and count its items' impressions
        (``impressions``); the user's earlier open decisions are now due within the grace
        (they moved on). A decision whose join is already closed (a redelivery) is left
        alone; one delivered again while open counts nothing twice (the impression mark,
        and the weights its first delivery kept)."""
        if not decisions:
            return
        examine = await self._examination.estimate()
        rates = await self._rates(sorted({s.item_id for d in decisions for s in d.shown}), now_ms)
        wait_ms, grace_ms = int(self._config.wait_s * 1000), int(self._config.grace_s * 1000)
        async with self._redis.pipeline(transaction=False) as pipe:
            for d in decisions:
                positions = np.array([s.position for s in d.shown], np.int64)
                attract = np.array([rates.get(s.item_id, 0.0) for s in d.shown])
                weights = miss_weight(at(examine, positions), attract)
                args: list[bytes | str | int | float] = [
                    encode_decision(d),
                    d.request_id,
                    d.at_ms,
                    JOIN_TTL_S,
                    d.context or ALL_CONTEXTS,
                ]
                for shown, weight in zip(d.shown, weights.tolist(), strict=True):
                    args += [shown.item_id, repr(float(weight))]
                await queue_script(
                    pipe,
                    self._open,
                    [
                        keys.user_decision(d.user_id, d.request_id),
                        keys.user_open_decisions(d.user_id),
                    ],
                    args,
                )
            replies = await pipe.execute()
        async with self._redis.pipeline(transaction=False) as pipe:
            for d, reply in zip(decisions, replies, strict=True):
                if reply[0] != 1:
                    continue
                due = keys.decisions_due(keys.partition_of(d.user_id, self._partitions))
                pipe.zadd(due, {member_of(d.user_id, d.request_id): d.at_ms + wait_ms})
                for rid in reply[1]:
                    member = member_of(d.user_id, as_text(rid))
                    pipe.zadd(due, {member: d.at_ms + grace_ms}, lt=True)
                kept = reply[2]  # per shown item: its weight, its state, its grade
                counted = impressions(
                    d,
                    [float(kept[3 * n]) for n in range(len(d.shown))],
                    [as_text(kept[3 * n + 1]) for n in range(len(d.shown))],
                    [float(kept[3 * n + 2]) for n in range(len(d.shown))],
                )
                await self._posteriors.queue_add(
                    pipe,
                    [d.context, ALL_CONTEXTS],
                    impression_mark(d.request_id),
                    counted,
                    now_ms,
                )
            await pipe.execute()

    async def note(self, events: Sequence[FeedbackEvent], now_ms: int) -> None:
        """Add what the feedback reports for a served answer (``request_id``) to its join,
        and teach its item at once (module docstring): an engagement converts the item's
        impression into a success, a dismiss makes it a whole failure, a better action adds
        its gain of grade. A join whose decision has not come yet is due ``wait_s`` from
        now (it may never come); a join closed before impressions were counted at once
        gives a late engagement to its item directly, once (the interaction's mark)."""
        noted = [e for e in events if e.request_id is not None and field_of(e) is not None]
        if not noted:
            return
        async with self._redis.pipeline(transaction=False) as pipe:
            for e in noted:
                field = field_of(e)
                assert e.request_id is not None
                assert field is not None
                join = keys.user_decision(e.user_id, e.request_id)
                grade = repr(grade_of(e.action, e.reward_override))
                await queue_script(pipe, self._note, [join], [field, grade, JOIN_TTL_S, e.item_id])
            replies = await pipe.execute()
        wait_ms = int(self._config.wait_s * 1000)
        async with self._redis.pipeline(transaction=False) as pipe:
            queued = False
            for e, reply in zip(noted, replies, strict=True):
                assert e.request_id is not None
                if reply is None:
                    continue
                kind = as_text(reply[0])
                if kind == UNDECIDED:
                    due = keys.decisions_due(keys.partition_of(e.user_id, self._partitions))
                    pipe.zadd(
                        due,
                        {member_of(e.user_id, e.request_id): now_ms + wait_ms},
                        nx=True,
                    )
                    queued = True
                    continue
                lesson = noted_lesson(e, reply)
                if lesson is None:
                    continue
                mark, cells, outcome = lesson
                await self._posteriors.queue_add(pipe, cells, mark, [outcome], now_ms)
                queued = True
            if queued:
                await pipe.execute()

    async def unjoined(self, events: Sequence[FeedbackEvent], now_ms: int) -> None:
        """Feedback that names no served answer teaches the item's all-context posterior
        at once: an engagement a success, a dismiss a failure, once each (the
        interaction's mark)."""
        async with self._redis.pipeline(transaction=False) as pipe:
            queued = False
            for e in events:
                if e.request_id is not None:
                    continue
                if e.action in ENGAGED_ACTIONS:
                    grade = grade_of(e.action, e.reward_override)
                    outcome = ItemOutcome(e.item_id, 1.0, 0.0, grade)
                elif e.action == Action.DISMISS:
                    outcome = ItemOutcome(e.item_id, 0.0, 1.0)
                else:
                    continue
                await self._posteriors.queue_add(
                    pipe, [ALL_CONTEXTS], e.interaction_id, [outcome], now_ms
                )
                queued = True
            if queued:
                await pipe.execute()

    async def close_due(self, now_ms: int) -> int:
        """Claim the joins whose window is over, at most ``CLOSE_BATCH`` per partition
        (other workers close none of them for ``CLAIM_S``), and close them; returns how
        many."""
        claimed_until = now_ms + int(CLAIM_S * 1000)
        async with self._redis.pipeline(transaction=False) as pipe:
            for p in range(self._partitions):
                await queue_script(
                    pipe, self._claim, [keys.decisions_due(p)], [now_ms, claimed_until, CLOSE_BATCH]
                )
            due = await pipe.execute()
        pairs = [
            tuple(as_text(member).split(SEP, 1))
            for members in due
            for member in members
            if SEP in as_text(member)
        ]
        if pairs:
            await self.close([(u, r) for u, r in pairs], now_ms)
        return len(pairs)

    async def close(self, joins: Sequence[tuple[str, str]], now_ms: int) -> None:
        """Apply what each (user, request id) join taught, then leave its tombstone."""
        records, finished, counted_at_once = await self._read(joins)
        observations, tally = await self._learn(records, counted_at_once, now_ms)
        await self._users.process(observations)
        await self._examination.add(tally)
        async with self._redis.pipeline(transaction=False) as pipe:
            queue_rewards(
                pipe,
                records,
                now_ms,
                partitions=self._partitions,
                retention_s=self._config.retention_s,
                retention_entries=self._config.retention_entries,
            )
            self._queue_tombstones(pipe, records, finished)
            queue_curve(pipe, curve_point(records), now_ms)
            await pipe.execute()
        self._users.stats.closed += len(records)

    async def _read(
        self, joins: Sequence[tuple[str, str]]
    ) -> tuple[list[JoinRecord], list[tuple[str, str]], dict[str, dict[str, float]]]:
        """The joins to close, read: each one's record; the (user, request id) of those
        closed already; the impression weights of those whose items were counted when
        their decision came, by request id."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for user, rid in joins:
                pipe.hgetall(keys.user_decision(user, rid))
            found = await pipe.execute()
        records: list[JoinRecord] = []
        finished: list[tuple[str, str]] = []
        counted_at_once: dict[str, dict[str, float]] = {}
        for (user, rid), fields in zip(joins, found, strict=True):
            if CLOSED.encode() in fields:
                # Closed already (by a worker that died before tidying up): nothing to learn.
                finished.append((user, rid))
                continue
            decision, engaged, dismissed = parse_join(fields)
            weights = kept_weights(fields)
            if decision is not None and weights:
                counted_at_once[rid] = weights
            records.append((user, rid, decision, engaged, dismissed))
        return records, finished, counted_at_once

    async def _learn(
        self,
        records: Sequence[JoinRecord],
        counted_at_once: Mapping[str, dict[str, float]],
        now_ms: int,
    ) -> tuple[list[Observation], Tally]:
        """Add to the item posteriors what the joins taught them at their close, and return
        what they teach the users' models (their misses) and the position-bias tally."""
        examine = await self._examination.estimate()
        item_ids = sorted({s.item_id for _, _, d, _, _ in records if d for s in d.shown})
        attract = await self._rates(item_ids, now_ms)
        tally = Tally.empty()
        observations: list[Observation] = []
        async with self._redis.pipeline(transaction=False) as pipe:
            for user, rid, decision, engaged, dismissed in records:
                if decision is None:
                    # Feedback for an answer whose record never came: what was engaged
                    # with still counts, for all contexts.
                    items = [ItemOutcome(i, 1.0, 0.0, engaged[i]) for i in sorted(engaged)]
                    await self._posteriors.queue_add(pipe, [ALL_CONTEXTS], rid, items, now_ms)
                    continue
                closed = outcomes(decision, engaged, dismissed, examine, attract)
                kept = counted_at_once.get(rid)
                if kept is None:
                    # A join of an older worker: its items learn now, as they used to.
                    await self._posteriors.queue_add(
                        pipe, [decision.context, ALL_CONTEXTS], rid, closed.items, now_ms
                    )
                else:
                    # The items learnt when it came; the misses weigh what they counted.
                    closed = Closed(
                        closed.items,
                        [(item, kept.get(item, w)) for item, w in closed.misses],
                        closed.tally,
                    )
                tally = Tally(
                    tally.examined + closed.tally.examined, tally.shown + closed.tally.shown
                )
                observations += [
                    Observation(user, item, False, weight, closing_id(rid), now_ms, False)
                    for item, weight in closed.misses
                    if item not in dismissed  # learnt from the dismiss itself, once
                ]
            await pipe.execute()
        return observations, tally

    def _queue_tombstones(
        self,
        pipe: RedisPipeline,
        records: Sequence[JoinRecord],
        finished: Sequence[tuple[str, str]],
    ) -> None:
        """Each closed join made a tombstone, and every join closed taken off its user's
        open decisions and its partition's due joins."""
        for user, rid, decision, *_ in records:
            # What stays of a closed join: its context cell, for a late click, and what
            # was counted at the close, so that a redelivery of it is not late.
            join = keys.user_decision(user, rid)
            pipe.hdel(join, DECISION)
            pipe.hset(join, CLOSED, decision.context if decision else ALL_CONTEXTS)
            pipe.expire(join, CLOSED_TTL_S)
        for user, rid in [(user, rid) for user, rid, *_ in records] + list(finished):
            pipe.zrem(keys.user_open_decisions(user), rid)
            due = keys.decisions_due(keys.partition_of(user, self._partitions))
            pipe.zrem(due, member_of(user, rid))

    async def _rates(self, item_ids: list[str], now_ms: int) -> dict[str, float]:
        """Each item's engagement rate over all contexts (the prior's for an unseen one)."""
        if not item_ids:
            return {}
        rates = await self._posteriors.rates(item_ids, now_ms)
        return dict(zip(item_ids, rates.tolist(), strict=True))
