"""Shadow (apprentice) mode: a candidate policy run beside the live one on a sample of live
decisions, off their path, its would-be slates and both policies' propensities recorded
(``protocol.shadows``), and the two compared once the rewards are in. The same at an
origin (``origin.offline.shadow``) and at an edge (``edge.ranking.shadow``): each hands a sampled
decision's context (``protocol.contexts``: built when the shadow gets to it) to
``ShadowRunner.submit`` and is answered; the runner replays the shadow and the live policy
on it (``evaluation.replay``) in a thread and hands the record to ``write`` (the process's
log of ``shadow:{p}``). A full queue drops the sample and counts it, never waits.

``compare`` is position-based SNIPS and IPS over the records whose joins have closed,
beside the live policy's own engagements on the same decisions, with a bootstrap
interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from evaluation.estimators import SlateLog, estimate
from evaluation.replay import DRAWS, replay, rows_of
from protocol.contexts import RankedContext
from protocol.policies import Policy
from protocol.rewards import Rewarded
from protocol.shadows import ShadowDecision

log = logging.getLogger(__name__)

MAX_QUEUE = 256
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
        write: Callable[[ShadowDecision], None],
        *,
        rate: float,
        sample: Callable[[], float],
        rng: np.random.Generator,
        draws: int = DRAWS,
    ) -> None:
        self.policy = policy
        self._write = write
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
            self._write(record)
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
