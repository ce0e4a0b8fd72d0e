"""Shadow (apprentice) mode: a candidate policy (``PERSO_SHADOW_POLICY``) run beside the live
one on a sample of live requests (``PERSO_SHADOW_RATE``), its would-be slates and the
propensities logged (``protocol.shadows``), and the two compared on the joined rewards.

Off the critical path: a sampled request hands its decision's context (the record the
context log keeps, ``protocol.contexts``, and the kept items' vectors) to a bounded queue
and is answered; a background task replays the shadow and the live policy on it
(``evaluation.replay``, in a thread) and appends the record to ``shadow:{p}`` through a
``DecisionLog``. When the queue is full a sample is dropped and counted, never waited for.
Requests that set their own ``exploration_rate`` or ``diversity_weight`` ranked by
something else than the live policy and are not shadowed.

The comparison (``compare``) is position-based SNIPS and IPS over the shadow records whose
joins have closed, beside the live policy's own engagements on the same decisions, with a
bootstrap interval; ``ShadowRunner.refresh`` computes it every ``REPORT_EVERY_S`` over the
newest ``REPORT_RECORDS`` records for ``/metrics``, and ``perso evaluate --shadow NAME``
prints it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt
from redis.asyncio import Redis
from redis.exceptions import RedisError

from evaluation.estimators import SlateLog, estimate
from evaluation.replay import DRAWS, replay, rows_of
from origin.offline.window import Page, entries, records_of
from protocol import keys
from protocol.contexts import RankedContext
from protocol.decisions import DECISION_FIELD, EncodedDecision
from protocol.exceptions import MalformedMessage
from protocol.policies import Policy
from protocol.rewards import REWARD_FIELD, Rewarded, decode_reward
from protocol.shadows import ShadowDecision, decode_shadow, encode_shadow
from sync.decision_log import DecisionLog

log = logging.getLogger(__name__)

MAX_QUEUE = 256
REPORT_EVERY_S = 60.0
REPORT_RECORDS = 20_000
BOOTSTRAP = 300


Record = Callable[[], tuple[RankedContext, npt.NDArray[np.float32]]]


@dataclass(frozen=True, eq=False)
class _Sample:
    record: Record  # the context's record and its kept items' vectors, built when run
    shown: list[str]
    live: Policy


@dataclass
class ShadowCounters:
    sampled: int = 0
    logged: int = 0
    dropped: int = 0  # the queue was full
    failed: int = 0


@dataclass(frozen=True)
class ShadowComparison:
    policy: str
    live: str
    decisions: int  # shadowed decisions whose joins have closed
    live_value: float  # the live policy's engagements per slate on them
    shadow_snips: float
    shadow_ips: float
    low: float  # SNIPS's 95% bootstrap interval
    high: float
    ess: float


class ShadowRunner:
    def __init__(
        self,
        policy: Policy,
        log_: DecisionLog,
        *,
        rate: float,
        sample: Callable[[], float],
        rng: np.random.Generator,
        draws: int = DRAWS,
    ) -> None:
        self.policy = policy
        self.log = log_
        self._rate = rate
        self._sample = sample
        self._rng = rng
        self._draws = draws
        self._queue: deque[_Sample] = deque()
        self._ready = asyncio.Event()
        self.counters = ShadowCounters()
        self.latest: ShadowComparison | None = None

    def sampled(self) -> bool:
        return self._rate > 0 and self._sample() < self._rate

    def submit(self, record: Record, shown: list[str], live: Policy) -> None:
        """Queue a decision for the shadow (``record`` builds its context when the shadow
        gets to it); never blocks (a full queue drops it)."""
        self.counters.sampled += 1
        if len(self._queue) >= MAX_QUEUE:
            self.counters.dropped += 1
            return
        self._queue.append(_Sample(record, shown, live))
        self._ready.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Work through the queue until ``stop``."""
        while not stop.is_set():
            if not self._queue:
                self._ready.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._ready.wait(), 1.0)
                continue
            sample = self._queue.popleft()
            try:
                record = await asyncio.to_thread(self._shadowed, sample)
            except Exception:  # a bug in one sample must not stop the shadow
                self.counters.failed += 1
                log.exception("a shadow decision could not be computed")
                continue
            self.log.log(functools.partial(EncodedDecision, record.user_id, encode_shadow(record)))
            self.counters.logged += 1

    def _shadowed(self, s: _Sample) -> ShadowDecision:
        c, vectors = s.record()
        rows = rows_of(c, s.shown)
        mine = replay(c, vectors, rows, self.policy.config, self._rng, draws=self._draws)
        live = replay(c, vectors, rows, s.live.config, self._rng, draws=self._draws)
        would: list[str] = []
        would_p: list[float] = []
        if mine.slates is not None:
            first = mine.slates[0]
            would = [c.items[r] for r in first if r >= 0]
            would_p = [float(p) for p in (mine.slates == first[None, :]).mean(axis=0)][: len(would)]
        floor = 1.0 / (self._draws + 1)
        return ShadowDecision(
            request_id=c.request_id,
            user_id=c.user_id,
            at_ms=c.at_ms,
            policy=self.policy.label,
            live=s.live.label,
            shown=tuple(s.shown),
            live_p=tuple(float(max(p, floor)) for p in live.propensity),
            shadow_p=tuple(float(p) for p in mine.propensity),
            would_show=tuple(would),
            would_p=tuple(would_p),
        )

    async def refresh(self, redis: Redis, partitions: int) -> None:
        """Recompute ``latest`` over the newest records (for ``/metrics``); a failed read
        keeps the last."""
        try:
            records, rewards = await read_shadow(redis, partitions, self.policy.name)
        except RedisError as exc:
            log.warning("shadow comparison not refreshed: %s", exc)
            return
        self.latest = compare(records, rewards, np.random.default_rng(0))

    async def report(self, redis: Redis, partitions: int, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), REPORT_EVERY_S)
            await self.refresh(redis, partitions)


async def read_shadow(
    redis: Redis, partitions: int, name: str, *, limit: int = REPORT_RECORDS
) -> tuple[list[ShadowDecision], dict[str, Rewarded]]:
    """The newest shadow records of the policy ``name`` (``limit`` over all partitions) and
    the rewards of their decisions."""
    records: list[ShadowDecision] = []
    per_partition = max(1, limit // max(partitions, 1))
    oldest: int | None = None
    for p in range(partitions):
        page = cast(Page, await redis.xrevrange(keys.shadow_stream(p), count=per_partition))
        for entry_id, fields in page:
            records += _decoded(fields.get(DECISION_FIELD), name)
            at = int(entry_id.split(b"-")[0])
            oldest = at if oldest is None else min(oldest, at)
    rewards: dict[str, Rewarded] = {}
    wanted = {s.request_id for s in records}
    for p in range(partitions if oldest is not None else 0):
        async for raw in entries(redis, keys.rewards_stream(p), REWARD_FIELD, oldest or 0, None):
            with contextlib.suppress(MalformedMessage):
                r = decode_reward(raw)
                if r.request_id in wanted:
                    rewards.setdefault(r.request_id, r)
    return records, rewards


def _decoded(raw: bytes | None, name: str) -> list[ShadowDecision]:
    """The shadow records of policy ``name`` in one entry (malformed ones skipped)."""
    out = []
    for record in records_of(raw) if raw is not None else []:
        with contextlib.suppress(MalformedMessage):
            s = decode_shadow(record)
            if s.policy.partition("/")[0] == name:
                out.append(s)
    return out


def compare(
    records: Sequence[ShadowDecision],
    rewards: dict[str, Rewarded],
    rng: np.random.Generator,
    samples: int = BOOTSTRAP,
) -> ShadowComparison | None:
    """The shadow against the live policy on the records whose joins closed; None when
    none has."""
    joined = [(s, rewards[s.request_id]) for s in records if s.request_id in rewards and s.shown]
    if not joined:
        return None
    k = max(len(s.shown) for s, _ in joined)
    n = len(joined)
    logged, target, reward = np.ones((n, k)), np.zeros((n, k)), np.zeros((n, k))
    shown = np.zeros((n, k), bool)
    for i, (s, r) in enumerate(joined):
        m = len(s.shown)
        shown[i, :m] = True
        logged[i, :m] = s.live_p
        target[i, :m] = s.shadow_p
        reward[i, :m] = [1.0 if item in r.engaged else 0.0 for item in s.shown]
    slate_log = SlateLog(logged=logged, target=target, reward=reward, shown=shown)
    snips = estimate(slate_log, "snips", rng, samples=samples)
    ips = estimate(slate_log, "ips", rng, samples=1)
    first = joined[0][0]
    return ShadowComparison(
        policy=first.policy,
        live=first.live,
        decisions=n,
        live_value=float(np.where(shown, reward, 0.0).sum(axis=1).mean()),
        shadow_snips=snips.value,
        shadow_ips=ips.value,
        low=snips.low,
        high=snips.high,
        ess=snips.ess,
    )
