"""Position bias: the chance that a user looks at a slate's position at all, estimated from
the decision log, not assumed.

The position-based model (Craswell et al. 2008): an item at position k is engaged with
when the user examines position k (probability e_k) and finds the item attractive
(probability a, the user model's prediction); e_1 = 1 fixes the scale. Its parameters are
estimated by expectation-maximisation over the joined decisions (Wang et al., "Position
Bias Estimation for Unbiased Learning to Rank in Personal Search", WSDM 2018): for every
shown item the expected examination is 1 when it was engaged with, and

    P(examined | not engaged) = e_k (1 - a) / (1 - e_k a)

otherwise (``miss_weight``); e_k is the expected examinations at k over the impressions at
k (``Tally``, kept in Redis by the workers). The same ``miss_weight`` is how much a
non-engagement counts as a failure for the item posteriors and the user model.

Before any evidence (and for positions with little), the estimate is pulled toward
``PRIOR`` (1 / sqrt(k)) with ``PRIOR_IMPRESSIONS`` pseudo-impressions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]

MAX_POSITIONS = 100
PRIOR: Array = 1.0 / np.sqrt(np.arange(1, MAX_POSITIONS + 1, dtype=np.float64))
PRIOR_IMPRESSIONS = 200.0
# Tallies are scaled down past this many impressions at a position, so that the estimate
# follows a changing layout (and forgets the first, poorly fitted expectations).
MAX_IMPRESSIONS = 100_000.0


@dataclass(frozen=True, slots=True)
class Tally:
    """Expected examinations and impressions per position (index 0: position 1)."""

    examined: Array
    shown: Array

    @classmethod
    def empty(cls) -> Tally:
        return cls(np.zeros(MAX_POSITIONS), np.zeros(MAX_POSITIONS))


def estimate(tally: Tally) -> Array:
    """e_k for k = 1..MAX_POSITIONS, e_1 = 1, each in (0, 1]."""
    e = (tally.examined + PRIOR_IMPRESSIONS * PRIOR) / (tally.shown + PRIOR_IMPRESSIONS)
    out: Array = np.clip(e / e[0], 1e-3, 1.0)
    return out


def at(probs: Array, positions: npt.NDArray[np.int64]) -> Array:
    """e_k of 1-based ``positions`` (beyond ``MAX_POSITIONS``: the last one's)."""
    out: Array = probs[np.clip(positions, 1, MAX_POSITIONS) - 1]
    return out


def miss_weight(examine: Array, attract: Array) -> Array:
    """P(examined | not engaged) = e (1 - a) / (1 - e a)."""
    out: Array = examine * (1.0 - attract) / np.maximum(1.0 - examine * attract, 1e-9)
    return out


def e_step(
    positions: npt.NDArray[np.int64],
    engaged: npt.NDArray[np.bool_],
    attract: Array,
    probs: Array,
) -> Tally:
    """One decision's contribution: expected examinations and impressions per position."""
    pos = np.clip(positions, 1, MAX_POSITIONS) - 1
    expected = np.where(engaged, 1.0, miss_weight(probs[pos], attract))
    examined = np.bincount(pos, weights=expected, minlength=MAX_POSITIONS).astype(np.float64)
    shown = np.bincount(pos, minlength=MAX_POSITIONS).astype(np.float64)
    return Tally(examined, shown)


def added(tally: Tally, more: Tally) -> Tally:
    """``tally + more``, scaled down where a position passed ``MAX_IMPRESSIONS``."""
    examined, shown = tally.examined + more.examined, tally.shown + more.shown
    scale = np.minimum(1.0, MAX_IMPRESSIONS / np.maximum(shown, 1.0))
    return Tally(examined * scale, shown * scale)
