"""Rewards joined to decisions (Personalizer's reward wait time): what each shown item of a
served answer taught, once the user has had their chance to act on it.

A decision (``protocol.decisions``) opens a join: ``u:{user}:dec:<request_id>`` holds the
record, and every engagement or dismiss the feedback reports for that request id is added
to it as it arrives, in either order (an edge logs its decisions in batches, a click may
come first). The join closes when its reward window is over
(``PERSO_REWARD_WAIT_S`` after it was served), or, earlier, ``PERSO_REWARD_GRACE_S`` after
the same user's next decision (they moved on). Feedback whose decision has not come when
it is noted schedules the join too, so that an engagement counts (for all contexts) even if
the decision never comes: the decision log is best effort. Then, for each shown item
(``outcomes``):

- engaged with (a click or better): one engagement for the item's posterior, and its best
  grade for the item's value (``relevance.item_value``: a purchase is worth more than a
  click, not a part of a failure);
- dismissed: one failure, whatever the position;
- left alone: a failure counted by the chance that its position was examined given no
  engagement (``relevance.examination.miss_weight``), for the item's posterior and, as a
  negative of that weight, for the user's model;

and the position-bias tally gets the decision's expected examinations. What the decision
earned is appended to the reward log (``protocol.rewards``, ``rewards:{p}``), for offline
evaluation. An engagement that
comes after its join closed counts then (a late click); a better action on an item whose
engagement was counted (a purchase after the close counted the click) adds the difference
of grades to the item's value. Engagements and
dismisses reach the user's model when their event is read (``origin.worker.consumer``), not
at the close, so a click is learnt at once (and a dismiss once).

Exactly once: a worker claims the due joins it closes for ``CLAIM_S`` (another worker
closes none of them meanwhile); the item posteriors are added under the decision's mark,
the user's model under the closing's observation id (its window), and the join becomes a
tombstone last (its context cell and what was counted at the close, for late feedback); a
worker that dies mid-close leaves it claimed, and once the claim is over its successor
repeats what is missing and nothing else (a join found closed already is only tidied up).
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

    async def open(self, decisions: Sequence[Decision]) -> None:
        """Record each decision for its join; the user's earlier open decisions are now due
        within the grace (they moved on). A decision whose join is already closed (a
        redelivery) is left alone."""
        if not decisions:
            return
        wait_ms, grace_ms = int(self._config.wait_s * 1000), int(self._config.grace_s * 1000)
        async with self._redis.pipeline(transaction=False) as pipe:
            for d in decisions:
                await queue_script(
                    pipe,
                    self._open,
                    [
                        keys.user_decision(d.user_id, d.request_id),
                        keys.user_open_decisions(d.user_id),
                    ],
                    [encode_decision(d), d.request_id, d.at_ms, JOIN_TTL_S],
                )
            replies = await pipe.execute()
        async with self._redis.pipeline(transaction=False) as pipe:
            for d, reply in zip(decisions, replies, strict=True):
                if reply[0] != 1:
                    continue
                due = keys.decisions_due(keys.partition_of(d.user_id, self._partitions))
                pipe.zadd(due, {_member(d.user_id, d.request_id): d.at_ms + wait_ms})
                for rid in reply[1:]:
                    member = _member(d.user_id, _text(rid))
                    pipe.zadd(due, {member: d.at_ms + grace_ms}, lt=True)
            await pipe.execute()

    async def note(self, events: Sequence[FeedbackEvent], now_ms: int) -> None:
        """Add what the feedback reports for a served answer (``request_id``) to its join;
        a join whose decision has not come yet is due ``wait_s`` from now (it may never
        come). A join already closed (a late click) gives the item its engagement directly,
        in the decision's context cell and for all contexts, once (the interaction's mark),
        unless the close counted it already (a redelivery)."""
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
                await queue_script(pipe, self._note, [join], [field, grade, JOIN_TTL_S])
            late = await pipe.execute()
        wait_ms = int(self._config.wait_s * 1000)
        async with self._redis.pipeline(transaction=False) as pipe:
            queued = False
            for e, reply in zip(noted, late, strict=True):
                if reply == _UNDECIDED:
                    assert e.request_id is not None
                    due = keys.decisions_due(keys.partition_of(e.user_id, self._partitions))
                    pipe.zadd(due, {_member(e.user_id, e.request_id): now_ms + wait_ms}, nx=True)
                    queued = True
                    continue
                if reply is None or e.action not in ENGAGED_ACTIONS:
                    continue
                cell, better = _text(reply[0]), _text(reply[1])
                if better:
                    # A better action on an engagement the close counted: its extra worth.
                    cells = [ALL_CONTEXTS]
                    outcome = ItemOutcome(e.item_id, 0.0, 0.0, float(better))
                else:
                    cells = [cell, ALL_CONTEXTS]
                    outcome = ItemOutcome(
                        e.item_id, 1.0, 0.0, grade_of(e.action, e.reward_override)
                    )
                await self._posteriors.queue_add(pipe, cells, e.interaction_id, [outcome], now_ms)
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
        for (user, rid), fields in zip(joins, found, strict=True):
            if _CLOSED.encode() in fields:
                # Closed already (by a worker that died before tidying up): nothing to learn.
                finished.append((user, rid))
                continue
            decision, engaged, dismissed = _parse(fields)
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
                await self._posteriors.queue_add(
                    pipe, [decision.context, ALL_CONTEXTS], rid, closed.items, now_ms
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


# KEYS[1] the join   ARGV[1] field   ARGV[2] the action's grade   ARGV[3] TTL s
# A field holds the best grade noted for it. Returns, for a join already closed: {its
# context cell, ''} when the close did not count the field (a late engagement), {cell, the
# grade it gains} when the field was counted at a lower grade (noted: the better grade),
# nil when it was counted as good already; for an open join (noted): nil, or 1 when its
# decision has not come (yet).
NOTE = """
local closed = redis.call('HGET', KEYS[1], 'c')
local grade = tonumber(ARGV[2])
local stored = redis.call('HGET', KEYS[1], ARGV[1])
local before = stored and tonumber(stored)
if closed then
  if not stored then return {closed, ''} end
  if before and grade > before then
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
    return {closed, tostring(grade - before)}
  end
  return nil
end
if not before or grade > before then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
redis.call('EXPIRE', KEYS[1], ARGV[3])
if redis.call('HEXISTS', KEYS[1], 'd') == 0 then return 1 end
return nil
"""
# NOTE's reply for a join without its decision.
_UNDECIDED = 1


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
# Returns {0} for a join already closed, else {1, request ids of the user's earlier ones}.
OPEN = """
if redis.call('HEXISTS', KEYS[1], 'c') == 1 then return {0} end
redis.call('HSET', KEYS[1], 'd', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[4])
local out = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[3])
table.insert(out, 1, 1)
return out
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


def _grade(value: bytes) -> float:
    """A join field's grade (a join noted before grades were kept holds the action)."""
    text = _text(value)
    try:
        return float(text)
    except ValueError:
        return grade_of(text)
