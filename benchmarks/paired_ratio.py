"""The ratio of two paths' totals over the same requests, with a paired bootstrap interval.

Each request is answered by both paths, so the pairs are resampled together (a request
drawn twice counts twice for both): the interval carries the noise of both paths' draws
(Thompson sampling) and of which requests were asked, and nothing of the difference
between independent samples that an unpaired comparison would add.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchmarks.click_model import Vector

RESAMPLES = 2_000
LEVEL = 0.95


@dataclass(frozen=True, slots=True)
class PairedRatio:
    """sum(numerator) / sum(denominator) over ``n`` pairs and its percentile interval."""

    ratio: float
    low: float
    high: float
    n: int


def paired_ratio(
    numerator: Vector,
    denominator: Vector,
    rng: np.random.Generator,
    *,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
) -> PairedRatio | None:
    """The ratio of the sums and its bootstrap interval; None without pairs or when the
    denominator sums to zero."""
    n = len(numerator)
    if n != len(denominator):
        raise ValueError(f"{n} numerators for {len(denominator)} denominators")
    total = float(denominator.sum())
    if n == 0 or total <= 0:
        return None
    drawn = rng.integers(0, n, size=(resamples, n))
    below = denominator[drawn].sum(axis=1)
    ratios = numerator[drawn].sum(axis=1) / np.where(below > 0, below, np.nan)
    tail = (1.0 - level) / 2
    low, high = np.nanquantile(ratios, [tail, 1.0 - tail])
    return PairedRatio(float(numerator.sum()) / total, float(low), float(high), n)
