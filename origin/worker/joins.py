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
  ``origin.worker.consumer``, so a click is learnt at once and a dismiss once);
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

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from origin.learned.examination import ExaminationStore
from origin.learned.posteriors import (
    ALL_CONTEXTS,
    ItemOutcome,
    PosteriorStore,
)
from origin.worker.batch import BatchApplier, Observation
from protocol import keys
from protocol.actions import ENGAGED_ACTIONS, grade_of
from protocol.api import Action
from protocol.decisions import Decision, decode_decision, encode_decision
from protocol.events import FeedbackEvent
from protocol.exceptions import MalformedMessage
from protocol.rewards import REWARD_FIELD, Rewarded, encode_reward
from redis_client.client import RedisClient, RedisPipeline, queue_script
from relevance.examination import Tally, at, e_step, miss_weight

log = logging.getLogger(__name__)

_DECISION = b"d"
_CLOSED = "c"
_ENGAGED = "e:"
_DISMISSED = "x:"
_WEIGHT = "w:"  # an item's impression weight, set when its decision came
_SEP = "\x1f"
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


@dataclass(frozen=True)
class Closed:
    """What one decision taught."""

    items: list[ItemOutcome]  # for the item posteriors
    # (item, weight): every non-engagement as a negative for the user's model (the close
    # applies those left alone: a dismiss taught the model when its event was read).
    misses: list[tuple[str, float]]
    tally: Tally  # expected examinations per position


def outcomes(
    decision: Decision,
    engaged: Mapping[str, float],
    dismissed: set[str],
    examine: npt.NDArray[np.float64],
    attract: Mapping[str, float],
) -> Closed:
    """The lessons of ``decision`` given what the user engaged with (each item's best
    grade) and dismissed: ``examine`` the position-bias estimate
    (``relevance.examination.estimate``), ``attract`` each item's engagement rate (a
    missing one counts as 0)."""
    items: list[ItemOutcome] = []
    misses: list[tuple[str, float]] = []
    positions = np.array([s.position for s in decision.shown], np.int64)
    hit = np.array([s.item_id in engaged for s in decision.shown], bool)
    rates = np.array([attract.get(s.item_id, 0.0) for s in decision.shown])
    weights = miss_weight(at(examine, positions), rates)
    for shown, was_hit, weight in zip(decision.shown, hit, weights, strict=True):
        if was_hit:
            items.append(ItemOutcome(shown.item_id, 1.0, 0.0, engaged[shown.item_id]))
        elif shown.item_id in dismissed:
            items.append(ItemOutcome(shown.item_id, 0.0, 1.0))
            misses.append((shown.item_id, 1.0))
        else:
            items.append(ItemOutcome(shown.item_id, 0.0, float(weight)))
            misses.append((shown.item_id, float(weight)))
    return Closed(items, misses, e_step(positions, hit, rates, examine))


def impression_mark(request_id: str) -> str:
    """The mark under which a decision's impressions are added to the item posteriors."""
    return f"imp:{request_id}"


def conversion_mark(request_id: str, item_id: str) -> str:
    """The mark under which an item's impression in a decision is converted (an engagement
    or a dismiss that came after its decision), once whatever reports it."""
    return f"conv:{request_id}{_SEP}{item_id}"


def impressions(
    decision: Decision, weights: Sequence[float], states: Sequence[str], grades: Sequence[float]
) -> list[ItemOutcome]:
    """What the shown items of ``decision`` count as when it comes: each its impression of
    weight ``weights[n]`` (a failure that weighs the chance it was examined), unless its
    ``states[n]`` says the user's engagement came first (``"o"``: a success worth
    ``grades[n]``) or their dismiss (``"x"``: a whole failure)."""
    out = []
    for shown, weight, state, grade in zip(decision.shown, weights, states, grades, strict=True):
        if state == _ENGAGED_FIRST:
            out.append(ItemOutcome(shown.item_id, 1.0, 0.0, grade))
        elif state == _DISMISSED_FIRST:
            out.append(ItemOutcome(shown.item_id, 0.0, 1.0))
        else:
            out.append(ItemOutcome(shown.item_id, 0.0, weight))
    return out


# An item's state in a join whose impressions were counted (its ``k:<item>`` field).
_ENGAGED_FIRST = "o"  # engaged before its decision came: counted as a success then
_DISMISSED_FIRST = "x"  # dismissed before it came: a whole failure then
_CONVERTED = "e"  # an engagement converted its impression
_DISMISS_CONVERTED = "d"  # a dismiss made its impression a whole failure


def curve_point(
    records: Sequence[tuple[str, str, Decision | None, Mapping[str, float], set[str]]],
) -> tuple[int, int]:
    """(slates, clicks) of closed joins: the decisions among them, and their shown items
    engaged with (a join without its decision record counts in neither)."""
    slates = clicks = 0
    for _, _, decision, engaged, _ in records:
        if decision is None:
            continue
        slates += 1
        clicks += sum(1 for shown in decision.shown if shown.item_id in engaged)
    return slates, clicks


def queue_curve(pipe: RedisPipeline, point: tuple[int, int], now_ms: int) -> None:
    """The learning curve's minute (``keys.learning_curve``) grown by ``point``."""
    slates, clicks = point
    if slates == 0:
        return
    key = keys.learning_curve(now_ms // 60_000)
    pipe.hincrby(key, "slates", slates)
    if clicks:
        pipe.hincrby(key, "clicks", clicks)
    pipe.expire(key, keys.LEARNING_CURVE_TTL_S)


def closing_id(request_id: str) -> str:
    """The observation id of a decision's closing, in the user's window."""
    return f"close:{request_id}"


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
                pipe.zadd(due, {_member(d.user_id, d.request_id): d.at_ms + wait_ms})
                for rid in reply[1]:
                    member = _member(d.user_id, _text(rid))
                    pipe.zadd(due, {member: d.at_ms + grace_ms}, lt=True)
                kept = reply[2]  # per shown item: its weight, its state, its grade
                counted = impressions(
                    d,
                    [float(kept[3 * n]) for n in range(len(d.shown))],
                    [_text(kept[3 * n + 1]) for n in range(len(d.shown))],
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
        noted = [e for e in events if e.request_id is not None and _field(e) is not None]
        if not noted:
            return
        async with self._redis.pipeline(transaction=False) as pipe:
            for e in noted:
                field = _field(e)
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
                kind = _text(reply[0])
                if kind == _UNDECIDED:
                    due = keys.decisions_due(keys.partition_of(e.user_id, self._partitions))
                    pipe.zadd(due, {_member(e.user_id, e.request_id): now_ms + wait_ms}, nx=True)
                    queued = True
                    continue
                cell = _text(reply[1])
                if kind == _CONVERT:
                    weight = float(reply[2])
                    mark = conversion_mark(e.request_id, e.item_id)
                    outcome = ItemOutcome(e.item_id, 1.0, -weight, float(reply[3]))
                    cells = [cell, ALL_CONTEXTS]
                elif kind == _DISMISS:
                    weight = float(reply[2])
                    mark = conversion_mark(e.request_id, e.item_id)
                    outcome = ItemOutcome(e.item_id, 0.0, 1.0 - weight)
                    cells = [cell, ALL_CONTEXTS]
                elif kind == _GAIN:
                    # A better action on an engagement counted: its extra worth.
                    mark, cells = e.interaction_id, [ALL_CONTEXTS]
                    outcome = ItemOutcome(e.item_id, 0.0, 0.0, float(reply[2]))
                elif kind == _LATE and e.action in ENGAGED_ACTIONS:
                    mark, cells = e.interaction_id, [cell, ALL_CONTEXTS]
                    outcome = ItemOutcome(
                        e.item_id, 1.0, 0.0, grade_of(e.action, e.reward_override)
                    )
                else:
                    continue
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
            tuple(_text(member).split(_SEP, 1))
            for members in due
            for member in members
            if _SEP in _text(member)
        ]
        if pairs:
            await self.close([(u, r) for u, r in pairs], now_ms)
        return len(pairs)

    async def close(self, joins: Sequence[tuple[str, str]], now_ms: int) -> None:
        """Apply what each (user, request id) join taught, then leave its tombstone."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for user, rid in joins:
                pipe.hgetall(keys.user_decision(user, rid))
            found = await pipe.execute()
        examine = await self._examination.estimate()
        records: list[tuple[str, str, Decision | None, dict[str, float], set[str]]] = []
        finished: list[tuple[str, str]] = []
        counted_at_once: dict[str, dict[str, float]] = {}
        for (user, rid), fields in zip(joins, found, strict=True):
            if _CLOSED.encode() in fields:
                # Closed already (by a worker that died before tidying up): nothing to learn.
                finished.append((user, rid))
                continue
            decision, engaged, dismissed = _parse(fields)
            weights = _weights(fields)
            if decision is not None and weights:
                counted_at_once[rid] = weights
            records.append((user, rid, decision, engaged, dismissed))
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
        await self._users.process(observations)
        await self._examination.add(tally)
        async with self._redis.pipeline(transaction=False) as pipe:
            self._queue_rewards(pipe, records, now_ms)
            for user, rid, decision, *_ in records:
                # What stays of a closed join: its context cell, for a late click, and what
                # was counted at the close, so that a redelivery of it is not late.
                join = keys.user_decision(user, rid)
                pipe.hdel(join, _DECISION)
                pipe.hset(join, _CLOSED, decision.context if decision else ALL_CONTEXTS)
                pipe.expire(join, CLOSED_TTL_S)
            for user, rid in [(user, rid) for user, rid, *_ in records] + finished:
                pipe.zrem(keys.user_open_decisions(user), rid)
                due = keys.decisions_due(keys.partition_of(user, self._partitions))
                pipe.zrem(due, _member(user, rid))
            queue_curve(pipe, curve_point(records), now_ms)
            await pipe.execute()
        self._users.stats.closed += len(records)

    def _queue_rewards(
        self,
        pipe: RedisPipeline,
        records: Sequence[tuple[str, str, Decision | None, dict[str, float], set[str]]],
        now_ms: int,
    ) -> None:
        """What each decision earned, to the reward log (before the tombstone: a worker
        that dies in between leaves the join to its successor, which logs it again; readers
        keep one record per request id). Feedback without its decision is not logged: with
        nothing of what was shown, it estimates nothing."""
        config = self._config
        min_id = max(0, now_ms - int(config.retention_s * 1000))
        streams = set()
        for user, rid, decision, engaged, dismissed in records:
            if decision is None:
                continue
            stream = keys.rewards_stream(keys.partition_of(user, self._partitions))
            record = Rewarded(rid, user, now_ms, engaged, tuple(sorted(dismissed)))
            pipe.xadd(
                stream,
                {REWARD_FIELD: encode_reward(record)},
                maxlen=config.retention_entries,
                approximate=True,
            )
            streams.add(stream)
        for stream in sorted(streams):
            pipe.xtrim(stream, minid=f"{min_id}-0", approximate=True)

    async def _rates(self, item_ids: list[str], now_ms: int) -> dict[str, float]:
        """Each item's engagement rate over all contexts (the prior's for an unseen one)."""
        if not item_ids:
            return {}
        rates = await self._posteriors.rates(item_ids, now_ms)
        return dict(zip(item_ids, rates.tolist(), strict=True))


# KEYS[1] the join
# ARGV[1] its field ('e:<item>' an engagement, 'x:<item>' a dismiss)   ARGV[2] the action's grade
# ARGV[3] an open join's TTL s   ARGV[4] the item
# A field holds the best grade noted for it. Where the item's impression was counted when
# its decision came (its 'w:<item>' weight), the first engagement converts it and a dismiss
# makes it a whole failure, once ('k:<item>' says which: 'e', 'd'; 'o' and 'x' when they
# came before the decision, counted with the impressions then); a redelivery gets the same
# reply, which its mark makes a no-op. Replies:
#   {'convert', cell, weight, grade}   take the impression back, count an engagement
#   {'dismiss', cell, weight}          count the rest of a whole failure
#   {'gain', cell, grade gained}       a better action on an engagement counted
#   {'late', cell}                     a join closed before impressions were counted: an
#                                      engagement nobody counted yet
#   {'undecided'}                      an open join whose decision has not come
#   nil                                nothing to count
NOTE = """
local closed = redis.call('HGET', KEYS[1], 'c')
local grade = tonumber(ARGV[2])
local stored = redis.call('HGET', KEYS[1], ARGV[1])
local before = stored and tonumber(stored)
local better = (not before) or grade > before
local engagement = string.sub(ARGV[1], 1, 2) == 'e:'
local weight = redis.call('HGET', KEYS[1], 'w:' .. ARGV[4])
if weight then
  local cell = redis.call('HGET', KEYS[1], 'cell')
  if better then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
  if not closed then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
  local state = redis.call('HGET', KEYS[1], 'k:' .. ARGV[4])
  if not state then
    if engagement then
      redis.call('HSET', KEYS[1], 'k:' .. ARGV[4], 'e')
      return {'convert', cell, weight, ARGV[2]}
    end
    redis.call('HSET', KEYS[1], 'k:' .. ARGV[4], 'd')
    return {'dismiss', cell, weight}
  end
  if engagement and (state == 'e' or state == 'o') then
    if before and grade > before then return {'gain', cell, tostring(grade - before)} end
    if state == 'e' then return {'convert', cell, weight, stored or ARGV[2]} end
    return nil
  end
  if (not engagement) and state == 'd' then return {'dismiss', cell, weight} end
  return nil
end
if closed then
  if not stored then return {'late', closed} end
  if before and grade > before then
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
    return {'gain', closed, tostring(grade - before)}
  end
  return nil
end
if better then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
redis.call('EXPIRE', KEYS[1], ARGV[3])
if redis.call('HEXISTS', KEYS[1], 'd') == 0 then return {'undecided'} end
return nil
"""
# NOTE's replies, by their first element.
_CONVERT = "convert"
_DISMISS = "dismiss"
_GAIN = "gain"
_LATE = "late"
_UNDECIDED = "undecided"


# KEYS[1] a partition's due joins   ARGV[1] now ms   ARGV[2] claimed until, ms   ARGV[3] at most
# Returns the joins due, each claimed: due again at ARGV[2], so that no other worker closes
# it meanwhile (its closer removes it; were the closer to die, another closes it then).
CLAIM = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
for _, member in ipairs(due) do redis.call('ZADD', KEYS[1], 'XX', ARGV[2], member) end
return due
"""


# KEYS[1] the join   KEYS[2] the user's open decisions
# ARGV[1] the decision record   ARGV[2] request id   ARGV[3] served at, ms   ARGV[4] TTL s
# ARGV[5] its context cell   ARGV[6..] each shown item and its impression weight (pairs)
# Returns {0} for a join already closed, else {1, {request ids of the user's earlier
# ones}, {per shown item: its weight (the first delivery's), its state, its grade}}: state
# 'o' engaged before the decision came (grade: the best noted), 'x' dismissed before it,
# '' otherwise (or the conversion a note made since a first delivery: counted then as shown).
OPEN = """
if redis.call('HEXISTS', KEYS[1], 'c') == 1 then return {0} end
redis.call('HSET', KEYS[1], 'd', ARGV[1])
redis.call('HSETNX', KEYS[1], 'cell', ARGV[5])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[4])
local earlier = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[3])
local items = {}
for i = 6, #ARGV, 2 do
  local item = ARGV[i]
  redis.call('HSETNX', KEYS[1], 'w:' .. item, ARGV[i + 1])
  local state = redis.call('HGET', KEYS[1], 'k:' .. item)
  local grade = '0'
  if not state then
    local engaged = redis.call('HGET', KEYS[1], 'e:' .. item)
    if engaged then
      state = 'o'
    elseif redis.call('HEXISTS', KEYS[1], 'x:' .. item) == 1 then
      state = 'x'
    end
    if state then redis.call('HSET', KEYS[1], 'k:' .. item, state) end
  end
  if state == 'o' then
    grade = redis.call('HGET', KEYS[1], 'e:' .. item) or '0'
  elseif state ~= 'x' then
    state = ''
  end
  items[#items + 1] = redis.call('HGET', KEYS[1], 'w:' .. item)
  items[#items + 1] = state
  items[#items + 1] = grade
end
return {1, earlier, items}
"""


def _field(e: FeedbackEvent) -> str | None:
    """The join's field for what ``e`` reports, None when it reports nothing joinable."""
    if e.action in ENGAGED_ACTIONS:
        return _ENGAGED + e.item_id
    if e.action == Action.DISMISS:
        return _DISMISSED + e.item_id
    return None


def _member(user_id: str, request_id: str) -> str:
    return f"{user_id}{_SEP}{request_id}"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _parse(
    fields: Mapping[bytes, bytes],
) -> tuple[Decision | None, dict[str, float], set[str]]:
    decision: Decision | None = None
    engaged: dict[str, float] = {}
    dismissed: set[str] = set()
    for name, value in fields.items():
        if name == _CLOSED.encode():
            continue
        if name == _DECISION:
            try:
                decision = decode_decision(value)
            except MalformedMessage as exc:
                log.warning("an unreadable decision in a join is skipped: %s", exc)
            continue
        text = _text(name)
        if text.startswith(_ENGAGED):
            engaged[text[len(_ENGAGED) :]] = _grade(value)
        elif text.startswith(_DISMISSED):
            dismissed.add(text[len(_DISMISSED) :])
    return decision, engaged, dismissed


def _weights(fields: Mapping[bytes, bytes]) -> dict[str, float]:
    """The impression weights a join kept when its decision came (empty: a join of an
    older worker, whose items learn at its close)."""
    prefix = _WEIGHT.encode()
    return {
        name[len(prefix) :].decode(): float(value)
        for name, value in fields.items()
        if name.startswith(prefix)
    }


def _grade(value: bytes) -> float:
    """A join field's grade (a join noted before grades were kept holds the action)."""
    text = _text(value)
    try:
        return float(text)
    except ValueError:
        return grade_of(text)
