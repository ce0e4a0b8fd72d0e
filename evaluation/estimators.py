"""Off-policy estimators for slates: inverse propensity scoring (IPS), self-normalised IPS
(SNIPS) and doubly robust (DR), with bootstrap intervals and the effective sample size.

**Which slate estimator, and why.** The log holds, for each decision and each position k,
the item shown there, its reward, and its *marginal* propensity: how likely the logging
policy was to put that item at that position (``relevance.slate``: the share of the
policy's 64 runs that did). The estimators here weight each position separately, with the
candidate's marginal probability of putting that same item there:

    w_ik = π_k(a_ik | x_i) / μ_k(a_ik | x_i)        V̂_IPS = 1/n Σ_i Σ_k w_ik r_ik

This is the position-based ("independent") IPS of Li et al. (2018). It is unbiased when a
position's reward depends on the item at that position and not on the rest of the slate,
which is the position-based click model (examination by position times attraction by item)
the product's own learning assumes (``relevance.examination``). It needs only marginal
propensities, which is what the log has. The pseudo-inverse estimator (Swaminathan et
al., 2017) assumes less (rewards additive over positions, any interaction with the slate
as a whole through its items' sum), but its closed form needs the logging policy's
positions to be drawn independently, which a slate without repeats is not; with our
marginals it would be approximate, with more variance. SNIPS divides each position's sum
by its weights' sum (biased, lower variance, bounded by the rewards); DR adds a reward
model's prediction for the candidate's own slate and weights only the model's error; DM,
the direct method, is that prediction alone (the baseline the others are judged beside).

Values are expected reward per slate (the sum over positions): for click rewards,
expected clicks per slate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]

# Below this, a logged propensity is read as "rarely chosen", not as a number (the logging
# policy's propensities are shares of 64 runs: 1/64 is their floor).
MIN_PROPENSITY = 1.0 / 64
# A warning when one decision carries more than this share of a position's weights, or
# the effective sample size is under this many decisions.
MAX_WEIGHT_SHARE = 0.05
MIN_ESS = 100.0
# Warn when shown items of a logged propensity under the smallest read as a number carry
# more than this share of all the weight. (With the live and candidate propensities replayed
# on common draws, benchmarks.offline_eval estimated candidates within 5% of the truth with
# up to 41% of the weight on such items: a lower bar would cry wolf.)
MAX_RARE_SHARE = 0.5
BOOTSTRAP_SAMPLES = 1_000


@dataclass(frozen=True, slots=True)
class SlateLog:
    """n logged decisions of K positions, aligned by row and position. ``shown`` marks
    the positions a decision filled (a shorter slate leaves the rest False)."""

    logged: Array  # (n, K) μ_k(a_ik | x_i): the logging policy's marginal propensity
    target: Array  # (n, K) π_k(a_ik | x_i): the candidate's, for the same item there
    reward: Array  # (n, K) r_ik in [0, 1]
    shown: npt.NDArray[np.bool_]
    # For DR: the reward model's prediction of the shown item there, q̂(x_i, a_ik, k), and
    # of the candidate's own slate, Σ_a π_k(a | x_i) q̂(x_i, a, k). None: no model.
    predicted: Array | None = None
    predicted_target: Array | None = None

    def __post_init__(self) -> None:
        shape = self.logged.shape
        arrays = (self.target, self.reward, self.shown, self.predicted, self.predicted_target)
        if len(shape) != 2 or any(a is not None and a.shape != shape for a in arrays):
            raise ValueError(f"every array must be (decisions, positions), like {shape}")
        if np.any(self.logged[self.shown] <= 0):
            raise ValueError("a shown item's logged propensity must be positive")
        if (self.predicted is None) != (self.predicted_target is None):
            raise ValueError("a reward model's two predictions go together")

    def __len__(self) -> int:
        return int(self.logged.shape[0])

    @property
    def weights(self) -> Array:
        """w_ik = π / μ on shown positions, 0 elsewhere."""
        out = np.zeros(self.logged.shape)
        np.divide(self.target, self.logged, out=out, where=self.shown)
        return out


@dataclass(frozen=True, slots=True)
class Estimate:
    estimator: str
    value: float
    low: float  # the bootstrap interval at ``level``
    high: float
    level: float
    ess: float  # the effective sample size, its smallest over positions
    warnings: tuple[str, ...] = field(default_factory=tuple)


def ips(log: SlateLog) -> float:
    return float(np.sum(log.weights * np.where(log.shown, log.reward, 0.0)) / len(log))


def snips(log: SlateLog) -> float:
    w = log.weights
    total = w.sum(axis=0)
    earned = (w * np.where(log.shown, log.reward, 0.0)).sum(axis=0)
    per_position = np.divide(earned, total, out=np.zeros_like(total), where=total > 0)
    return float(per_position.sum())


def dr(log: SlateLog) -> float:
    if log.predicted is None or log.predicted_target is None:
        raise ValueError("DR needs a reward model's predictions")
    shown = log.shown
    error = np.where(shown, log.reward - log.predicted, 0.0)
    direct = np.where(shown, log.predicted_target, 0.0)
    return float(np.sum(direct + log.weights * error) / len(log))


def dm(log: SlateLog) -> float:
    """The direct method: the reward model's value of the candidate's slates, no weights
    (biased by whatever the model gets wrong; the textbook baseline DR corrects)."""
    if log.predicted_target is None:
        raise ValueError("DM needs a reward model's predictions")
    return float(np.sum(np.where(log.shown, log.predicted_target, 0.0)) / len(log))


ESTIMATORS: dict[str, Callable[[SlateLog], float]] = {
    "ips": ips,
    "snips": snips,
    "dr": dr,
    "dm": dm,
}


def effective_sample_size(log: SlateLog) -> float:
    """(Σ w)² / Σ w² per position, the smallest over positions that were shown."""
    w = log.weights
    squares = (w * w).sum(axis=0)
    sizes = np.divide(w.sum(axis=0) ** 2, squares, out=np.zeros(w.shape[1]), where=squares > 0)
    filled = log.shown.any(axis=0)
    return float(sizes[filled].min()) if filled.any() else 0.0


def warnings_of(log: SlateLog, min_propensity: float = MIN_PROPENSITY) -> tuple[str, ...]:
    """Why an estimate from ``log`` may mean little; ``min_propensity``: the smallest logged
    propensity read as a number (our policy's are shares of 64 runs; another log's floor
    may be its own)."""
    out = []
    w = log.weights
    rare = log.shown & (log.logged < min_propensity) & (log.target > 0)
    share = float(w[rare].sum() / w.sum()) if w.sum() > 0 else 0.0
    if share > MAX_RARE_SHARE:
        out.append(
            f"{int(rare.sum())} shown items the candidate would show had a logged propensity "
            f"under {min_propensity:.4g} and carry {100 * share:.0f}% of the weight: the "
            "estimate rests on rare choices"
        )
    totals = w.sum(axis=0)
    shares = np.divide(w.max(axis=0), totals, out=np.zeros_like(totals), where=totals > 0)
    if np.any(shares > MAX_WEIGHT_SHARE):
        out.append(
            f"one decision carries {100 * float(shares.max()):.0f}% of a position's weight: "
            "the candidate is far from what was logged"
        )
    ess = effective_sample_size(log)
    if ess < MIN_ESS:
        out.append(f"effective sample size {ess:.0f} (of {len(log)} decisions)")
    return tuple(out)


def estimate(
    log: SlateLog,
    estimator: str,
    rng: np.random.Generator,
    *,
    samples: int = BOOTSTRAP_SAMPLES,
    level: float = 0.95,
    min_propensity: float = MIN_PROPENSITY,
) -> Estimate:
    """``estimator`` on ``log``, with a percentile bootstrap interval over decisions."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; known: {', '.join(ESTIMATORS)}")
    if len(log) == 0:
        raise ValueError("an empty log estimates nothing")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), not {level}")
    run = ESTIMATORS[estimator]
    n = len(log)
    values = np.empty(samples)
    for b in range(samples):
        values[b] = run(resampled(log, rng.integers(0, n, n)))
    tail = (1 - level) / 2
    low, high = np.quantile(values, [tail, 1 - tail])
    return Estimate(
        estimator=estimator,
        value=run(log),
        low=float(low),
        high=float(high),
        level=level,
        ess=effective_sample_size(log),
        warnings=warnings_of(log, min_propensity),
    )


def resampled(log: SlateLog, rows: npt.NDArray[np.intp]) -> SlateLog:
    return SlateLog(
        logged=log.logged[rows],
        target=log.target[rows],
        reward=log.reward[rows],
        shown=log.shown[rows],
        predicted=None if log.predicted is None else log.predicted[rows],
        predicted_target=None if log.predicted_target is None else log.predicted_target[rows],
    )
