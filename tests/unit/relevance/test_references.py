"""The reference policies' slates: which candidates, in which order, with which
propensities."""

from __future__ import annotations

import numpy as np
import pytest

from relevance.normal import cdf
from relevance.references import popular_slate, random_slate


def posteriors(means: list[float], strength: float = 10.0) -> tuple[np.ndarray, np.ndarray]:
    m = np.array(means)
    return m * strength, (1 - m) * strength


@pytest.mark.parametrize(
    ("means", "count", "rows"),
    [
        ([0.1, 0.5, 0.3], 2, [1, 2]),
        ([0.1, 0.5, 0.3], 3, [1, 2, 0]),
        ([0.1, 0.5, 0.3], 10, [1, 2, 0]),  # never more than the candidates
        ([0.2, 0.2, 0.4], 3, [2, 0, 1]),  # ties keep the candidates' order
        ([0.2], 1, [0]),
        ([], 3, []),
    ],
)
def test_popular_ranks_by_posterior_mean(means: list[float], count: int, rows: list[int]) -> None:
    alpha, beta = posteriors(means)
    slate = popular_slate(alpha, beta, count)
    assert slate.rows.tolist() == rows
    assert slate.propensities.tolist() == [1.0] * len(rows)
    assert not slate.exploration.any()
    assert np.allclose(cdf(slate.scores), np.array(means)[rows])


def test_popular_reads_the_mean_not_the_evidence() -> None:
    # 3 of 10 beats 20 of 100: the mean decides, however sure.
    slate = popular_slate(np.array([20.0, 3.0]), np.array([80.0, 7.0]), 1)
    assert slate.rows.tolist() == [1]


@pytest.mark.parametrize(("n", "count"), [(5, 3), (5, 5), (3, 10), (1, 1), (200, 10)])
def test_random_picks_distinct_candidates_with_propensity_one_in_n(n: int, count: int) -> None:
    alpha, beta = posteriors([0.5] * n)
    slate = random_slate(alpha, beta, count, np.random.default_rng(7))
    shown = min(n, count)
    assert len(set(slate.rows.tolist())) == len(slate) == shown
    assert set(slate.rows.tolist()) <= set(range(n))
    assert np.allclose(slate.propensities, 1.0 / n)


def test_random_is_uniform_over_items_and_positions() -> None:
    n, count, runs = 4, 2, 40_000
    alpha, beta = posteriors([0.1, 0.2, 0.3, 0.4])
    rng = np.random.default_rng(3)
    at = np.zeros((n, count))
    for _ in range(runs):
        for position, row in enumerate(random_slate(alpha, beta, count, rng).rows):
            at[row, position] += 1
    # Each item at each position 1/n of the time: what its propensity says.
    assert np.allclose(at / runs, 1.0 / n, atol=0.01)


def test_random_marks_what_the_means_would_not_have_shown_as_exploration() -> None:
    alpha, beta = posteriors([0.9, 0.1, 0.2])
    rng = np.random.default_rng(0)
    for _ in range(20):
        slate = random_slate(alpha, beta, 1, rng)
        assert bool(slate.exploration[0]) == (slate.rows[0] != 0)


def test_an_empty_candidate_set_is_an_empty_random_slate() -> None:
    slate = random_slate(np.array([]), np.array([]), 5, np.random.default_rng(0))
    assert len(slate) == 0
