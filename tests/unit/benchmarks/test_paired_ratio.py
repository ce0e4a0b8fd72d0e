"""The paired ratio: the point estimate is the ratio of the sums, the interval holds it and
narrows with pairs."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.paired_ratio import paired_ratio


def test_ratio_of_sums_not_mean_of_ratios() -> None:
    result = paired_ratio(np.array([1.0, 3.0]), np.array([2.0, 2.0]), np.random.default_rng(1))
    assert result is not None
    assert result.ratio == 1.0
    assert result.n == 2


def test_identical_paths_give_one_exactly() -> None:
    values = np.random.default_rng(2).uniform(0.1, 2.0, 500)
    result = paired_ratio(values, values.copy(), np.random.default_rng(3))
    assert result is not None
    assert (result.ratio, result.low, result.high) == (1.0, 1.0, 1.0)


def test_interval_holds_the_ratio_and_narrows_with_pairs() -> None:
    rng = np.random.default_rng(4)
    widths = []
    for n in (200, 5_000):
        base = rng.uniform(0.5, 1.5, n)
        noisy = 0.95 * base + rng.normal(0.0, 0.2, n)
        result = paired_ratio(noisy, base, np.random.default_rng(5))
        assert result is not None
        assert result.low <= result.ratio <= result.high
        assert 0.9 < result.ratio < 1.0
        widths.append(result.high - result.low)
    assert widths[1] < widths[0] / 3


@pytest.mark.parametrize(("numerator", "denominator"), [([], []), ([1.0], [0.0])])
def test_no_ratio_without_pairs_or_denominator(
    numerator: list[float], denominator: list[float]
) -> None:
    rng = np.random.default_rng(6)
    assert paired_ratio(np.array(numerator), np.array(denominator), rng) is None


def test_mismatched_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="2 numerators for 1"):
        paired_ratio(np.ones(2), np.ones(1), np.random.default_rng(7))
