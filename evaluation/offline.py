"""Offline evaluation of candidate policies on a window of the decision log: each logged
decision with its context (``protocol.contexts``) and what it earned (``protocol.rewards``),
turned into the slate logs the estimators read (``evaluation.estimators``), one per
candidate, and estimated.

The reward of a position is engagement: 1 when the item shown there was engaged with
(a click or better) before the decision's join closed, else 0; a value is expected
engagements per slate. The logging propensity μ is the live policy's, replayed on the same
context with ``DRAWS`` + 1 runs (``Propensities.REPLAYED``, the default) or as logged
(``LOGGED``): a logged propensity counts the served run among its 64, so it is never below
1/64 and is biased up for rarely chosen items, which biases IPS down. A replayed one that
comes out 0 for a shown item (it was that rare) is read as one run's share. The target
propensity π is the candidate's (``evaluation.replay``); DR's reward model is fitted on the
same window (``evaluation.reward_model``).

Common random numbers: on each decision the live policy and every candidate are replayed on
the same random draws (one generator seeded per decision). A propensity estimated from a few
hundred runs is noisy, and 1 / μ̂ is biased up where μ̂ is small (Jensen); with the same
draws, π̂ and μ̂ of a candidate near the live policy err together and their ratio, the
weight, keeps little of either error (the live policy replayed as a candidate weighs every
shown item exactly 1).

Besides the estimators' own warnings, ``support`` measures how much of the candidate's
choices fall where the live policy never goes (no replayed run put that item at that
position): position-based IPS cannot see rewards there, so a candidate with much of its
mass outside the log's support is estimated too low, whatever the interval says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np
import numpy.typing as npt

from evaluation.estimators import (
    BOOTSTRAP_SAMPLES,
    MIN_PROPENSITY,
    Estimate,
    SlateLog,
    estimate,
)
from evaluation.replay import Replayed, replay, rows_of
from evaluation.reward_model import RewardModel, fit
from protocol.contexts import RankedContext
from protocol.decisions import Decision
from protocol.policies import Policy, PolicyConfig
from protocol.rewards import Rewarded

Array = npt.NDArray[np.float64]

ESTIMATOR_NAMES = ("ips", "snips", "dr", "dm")
# Runs of each replay, plus one (``replay.DRAWS`` is the shadow's; an evaluation affords more).
DRAWS = 511
RARE_RUNS = 4
# Below this share of a candidate's choices inside the log's support, say so.
MIN_SUPPORT = 0.9


class Propensities(Enum):
    REPLAYED = "replayed"
    LOGGED = "logged"


@dataclass(frozen=True, eq=False)
class Logged:
    """One decision of the window: what was shown, its context and what it earned.
    ``vectors``: the context's kept items' unit vectors, by row."""

    decision: Decision
    context: RankedContext
    reward: Rewarded
    vectors: npt.NDArray[np.float32]

    @property
    def shown(self) -> list[str]:
        return [s.item_id for s in sorted(self.decision.shown, key=lambda s: s.position)]


@dataclass(frozen=True)
class PolicyEstimate:
    policy: Policy
    decisions: int
    estimates: tuple[Estimate, ...]
    support: float  # share of the candidate's choices the live policy also makes
    warnings: tuple[str, ...]

    def by(self, estimator: str) -> Estimate:
        return next(e for e in self.estimates if e.estimator == estimator)


@dataclass(frozen=True)
class Evaluation:
    live: Policy
    decisions: int
    positions: int
    on_policy: Estimate  # the live policy's own engagements per slate, bootstrapped
    candidates: tuple[PolicyEstimate, ...]


def engagement(records: Sequence[Logged], positions: int) -> tuple[Array, npt.NDArray[np.bool_]]:
    """(n, K) engagement per shown position, and which positions were shown."""
    reward = np.zeros((len(records), positions))
    shown = np.zeros((len(records), positions), bool)
    for i, r in enumerate(records):
        for k, item in enumerate(r.shown[:positions]):
            shown[i, k] = True
            reward[i, k] = 1.0 if item in r.reward.engaged else 0.0
    return reward, shown


def evaluate(
    records: Sequence[Logged],
    live: Policy,
    candidates: Sequence[Policy],
    rng: np.random.Generator,
    *,
    propensities: Propensities = Propensities.REPLAYED,
    samples: int = BOOTSTRAP_SAMPLES,
    level: float = 0.95,
    draws: int = DRAWS,
) -> Evaluation:
    """Every candidate estimated on ``records`` (logged by ``live``), each replay ``draws``
    + 1 runs on the decision's common random numbers."""
    if not records:
        raise ValueError("no logged decision with its context and reward in the window")
    positions = max(len(r.shown) for r in records)
    reward, shown = engagement(records, positions)
    model = fit([r.shown for r in records], reward, shown)
    rows = [rows_of(r.context, r.shown) for r in records]
    seeds = rng.integers(0, 2**63, len(records))
    logging = _replay_all(records, rows, seeds, live.config, draws)
    logged = _logged_propensities(records, logging, positions, propensities, draws)
    predicted = _predicted(records, model, positions)
    # A replayed propensity of fewer than this many runs is read as "rare", not as a number.
    rare = RARE_RUNS / (draws + 1)
    results = []
    for policy in candidates:
        replays = _replay_all(records, rows, seeds, policy.config, draws)
        target = np.zeros((len(records), positions))
        for i, rep in enumerate(replays):
            target[i, : rep.propensity.shape[0]] = rep.propensity[:positions]
        log = SlateLog(
            logged=logged,
            target=target,
            reward=reward,
            shown=shown,
            predicted=predicted,
            predicted_target=_predicted_target(records, replays, model, positions),
        )
        ests = tuple(
            estimate(log, name, rng, samples=samples, level=level, min_propensity=rare)
            for name in ESTIMATOR_NAMES
        )
        support = _support(records, logging, replays, positions)
        warnings = ests[0].warnings
        if support < MIN_SUPPORT:
            warnings += (
                f"{100 * (1 - support):.0f}% of the candidate's choices are where the live "
                "policy never goes: IPS cannot see their rewards, the estimate is low",
            )
        results.append(PolicyEstimate(policy, len(records), ests, support, warnings))
    return Evaluation(
        live=live,
        decisions=len(records),
        positions=positions,
        on_policy=_on_policy(reward, shown, rng, samples, level),
        candidates=tuple(results),
    )


def _replay_all(
    records: Sequence[Logged],
    rows: Sequence[npt.NDArray[np.intp]],
    seeds: npt.NDArray[np.int64],
    config: PolicyConfig,
    draws: int,
) -> list[Replayed]:
    """``config`` replayed on every record, each on its own seed's draws (common to every
    policy replayed on that record)."""
    return [
        replay(r.context, r.vectors, shown, config, np.random.default_rng(int(seed)), draws=draws)
        for r, shown, seed in zip(records, rows, seeds, strict=True)
    ]


def _logged_propensities(
    records: Sequence[Logged],
    logging: Sequence[Replayed],
    positions: int,
    propensities: Propensities,
    draws: int,
) -> Array:
    out = np.ones((len(records), positions))
    for i, (r, rep) in enumerate(zip(records, logging, strict=True)):
        shown = sorted(r.decision.shown, key=lambda s: s.position)[:positions]
        if propensities is Propensities.LOGGED:
            out[i, : len(shown)] = [s.propensity for s in shown]
        else:
            p = rep.propensity[: len(shown)]
            out[i, : len(shown)] = np.maximum(p, 1.0 / (draws + 1))
    return out


def _predicted(records: Sequence[Logged], model: RewardModel, positions: int) -> Array:
    out = np.zeros((len(records), positions))
    for i, r in enumerate(records):
        for k, item in enumerate(r.shown[:positions]):
            out[i, k] = model.predict(item, k)
    return out


def _predicted_target(
    records: Sequence[Logged], replays: Sequence[Replayed], model: RewardModel, positions: int
) -> Array:
    """Σ_a π_k(a) r̂(a, k): the reward model's value of the candidate's own slate, per
    position, averaged over its runs (for ``random``: over the retrieved candidates, the
    ones the context did not keep at the mean attraction)."""
    out = np.zeros((len(records), positions))
    for i, (r, rep) in enumerate(zip(records, replays, strict=True)):
        # Each kept item's attraction, and the mean's for MISSING (row -1: the last).
        attraction = np.array(
            [model.attraction.get(item, model.mean_attraction) for item in r.context.items]
            + [model.mean_attraction]
        )
        width = min(positions, len(r.shown))
        examination = model.examination[:width]
        if rep.slates is None:
            rest = max(r.context.retrieved - len(r.context.items), 0) * model.mean_attraction
            mean_a = (attraction[:-1].sum() + rest) / max(r.context.retrieved, 1)
            out[i, :width] = np.minimum(1.0, examination * mean_a)
            continue
        width = min(width, rep.slates.shape[1])
        predicted = np.minimum(1.0, attraction[rep.slates[:, :width]] * examination[:width])
        out[i, :width] = predicted.mean(axis=0)
    return out


def _support(
    records: Sequence[Logged],
    logging: Sequence[Replayed],
    replays: Sequence[Replayed],
    positions: int,
) -> float:
    """The share of the candidate's (item, position) choices the live policy's replayed
    runs also made."""
    inside = total = 0.0
    for r, live, cand in zip(records, logging, replays, strict=True):
        if live.slates is None:  # a random live policy goes everywhere
            return 1.0
        width = min(positions, len(r.shown), live.slates.shape[1])
        if width == 0:
            continue
        # made[row, k]: some live run put kept row ``row`` at position k (MISSING: the last).
        made = np.zeros((len(r.context.items) + 1, width), bool)
        made[live.slates[:, :width], np.arange(width)] = True
        if cand.slates is None:
            # Uniform over the retrieved candidates: the share of them the live runs used.
            inside += float(made[:-1].sum()) / max(r.context.retrieved, 1)
        else:
            w = min(width, cand.slates.shape[1])
            inside += float(made[cand.slates[:, :w], np.arange(w)].mean(axis=0).sum())
        total += width
    return inside / total if total else 1.0


def _on_policy(
    reward: Array,
    shown: npt.NDArray[np.bool_],
    rng: np.random.Generator,
    samples: int,
    level: float,
) -> Estimate:
    per_slate = np.where(shown, reward, 0.0).sum(axis=1)
    n = per_slate.shape[0]
    boot = np.array([per_slate[rng.integers(0, n, n)].mean() for _ in range(samples)])
    tail = (1 - level) / 2
    low, high = np.quantile(boot, [tail, 1 - tail])
    return Estimate("on-policy", float(per_slate.mean()), float(low), float(high), level, float(n))


__all__ = ["MIN_PROPENSITY", "Evaluation", "Logged", "PolicyEstimate", "Propensities", "evaluate"]
