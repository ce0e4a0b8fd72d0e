from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from relevance.item_posteriors import SHRINK_STRENGTH, probit_draws, probit_means, shrunk
from relevance.normal import cdf

STANDARD = NormalDist()


def arr(*values: float) -> np.ndarray:
    return np.array(values, np.float64)


@pytest.mark.parametrize(
    ("cell", "everywhere", "strength", "expected"),
    [
        # no evidence in the cell: the all-context mean, held by `strength` pseudo-counts
        ((1.0, 1.0), (30.0, 10.0), 10.0, (7.5, 2.5)),
        # the cell's own evidence (4 engagements, 6 misses) on top
        ((5.0, 7.0), (30.0, 10.0), 10.0, (11.5, 8.5)),
        # no shrinkage: the cell's evidence alone, floored above zero
        ((5.0, 7.0), (31.0, 11.0), 0.0, (4.0, 6.0)),
        ((1.0, 1.0), (31.0, 11.0), 0.0, (1e-3, 1e-3)),
        # fractional (weighted, decayed) evidence
        ((1.5, 3.25), (2.0, 2.0), 4.0, (2.5, 4.25)),
    ],
    ids=["empty-cell", "cell-evidence", "no-strength", "no-strength-no-evidence", "fractional"],
)
def test_shrunk(
    cell: tuple[float, float],
    everywhere: tuple[float, float],
    strength: float,
    expected: tuple[float, float],
) -> None:
    alpha, beta = shrunk(
        arr(cell[0]),
        arr(cell[1]),
        arr(everywhere[0]),
        arr(everywhere[1]),
        prior_alpha=1.0,
        prior_beta=1.0,
        strength=strength,
    )
    assert float(alpha[0]) == pytest.approx(expected[0])
    assert float(beta[0]) == pytest.approx(expected[1])


def test_shrunk_defaults_to_the_shrink_strength() -> None:
    alpha, beta = shrunk(arr(1.0), arr(1.0), arr(3.0), arr(1.0), prior_alpha=1.0, prior_beta=1.0)
    assert float(alpha[0] + beta[0]) == pytest.approx(SHRINK_STRENGTH)
    assert float(alpha[0] / (alpha[0] + beta[0])) == pytest.approx(0.75)


def test_a_cell_with_much_evidence_ranks_by_its_own_rate() -> None:
    # all contexts say 0.8; this cell has seen 0.1 over 10,000 examinations
    cell_alpha, cell_beta = arr(1.0, 1001.0), arr(1.0, 9001.0)
    alpha, beta = shrunk(
        cell_alpha, cell_beta, arr(81.0, 81.0), arr(21.0, 21.0), prior_alpha=1.0, prior_beta=1.0
    )
    means = alpha / (alpha + beta)
    assert float(means[0]) == pytest.approx(81 / 102)
    assert float(means[1]) == pytest.approx(0.1, abs=0.001)


def test_shrunk_is_aligned_by_item() -> None:
    cell_alpha, cell_beta = arr(1.0, 3.0, 1.0), arr(1.0, 1.0, 5.0)
    all_alpha, all_beta = arr(2.0, 9.0, 1.0), arr(8.0, 1.0, 9.0)
    alpha, beta = shrunk(
        cell_alpha, cell_beta, all_alpha, all_beta, prior_alpha=1.0, prior_beta=1.0
    )
    for i in range(3):
        a, b = shrunk(
            cell_alpha[i : i + 1],
            cell_beta[i : i + 1],
            all_alpha[i : i + 1],
            all_beta[i : i + 1],
            prior_alpha=1.0,
            prior_beta=1.0,
        )
        assert (alpha[i], beta[i]) == (a[0], b[0])


@pytest.mark.parametrize(
    ("alpha", "beta"), [(1.0, 1.0), (1.0, 99.0), (30.0, 10.0), (2.5, 0.5), (1.0, 1e9)]
)
def test_probit_means_are_the_inverse_normal_of_the_mean(alpha: float, beta: float) -> None:
    got = float(probit_means(arr(alpha), arr(beta))[0])
    assert got == pytest.approx(STANDARD.inv_cdf(alpha / (alpha + beta)), rel=1e-8)


def test_probit_means_order_items_by_their_rate() -> None:
    means = probit_means(arr(1.0, 5.0, 2.0, 50.0), arr(9.0, 5.0, 8.0, 50.0))
    assert means.shape == (4,)
    assert means[0] < means[2] < means[1] == pytest.approx(means[3])
    assert means[1] == pytest.approx(0.0, abs=1e-12)


def test_probit_draws_are_beta_draws_on_the_probit_scale() -> None:
    alpha, beta = arr(2.0, 30.0, 1.0, 0.5), arr(8.0, 3.0, 1.0, 0.5)
    n = 20_000
    out = probit_draws(alpha, beta, np.random.default_rng(0), n)
    assert out.shape == (n, 4)
    rates = cdf(out)
    mean = alpha / (alpha + beta)
    var = alpha * beta / ((alpha + beta) ** 2 * (alpha + beta + 1))
    # five standard errors for the means, 5% for the variances
    assert (np.abs(rates.mean(axis=0) - mean) < 5 * np.sqrt(var / n)).all()
    np.testing.assert_allclose(rates.var(axis=0), var, rtol=0.05)


def test_probit_draws_without_spread_are_the_means() -> None:
    alpha, beta = arr(2.0, 30.0, 1.0), arr(8.0, 3.0, 1.0)
    rng = np.random.default_rng(0)
    out = probit_draws(alpha, beta, rng, 3, spread=0.0)
    assert out.shape == (3, 3)
    for row in out:
        assert np.array_equal(row, probit_means(alpha, beta))
    # a writable array of its own, not a broadcast view
    out[0, 0] = 9.0
    assert out[1, 0] != 9.0


@pytest.mark.parametrize("spread", [0.5, 2.0])
def test_spread_scales_each_draws_distance_from_the_mean(spread: float) -> None:
    alpha, beta = arr(20.0), arr(20.0)
    n = 20_000
    plain = cdf(probit_draws(alpha, beta, np.random.default_rng(4), n))[:, 0]
    scaled = cdf(probit_draws(alpha, beta, np.random.default_rng(4), n, spread=spread))[:, 0]
    # the same underlying Beta draws, moved `spread` times as far from 0.5 (inside (0, 1))
    expected = np.clip(0.5 + spread * (plain - 0.5), 1e-6, 1 - 1e-6)
    np.testing.assert_allclose(scaled, expected, atol=2e-7)
    assert scaled.std() == pytest.approx(spread * plain.std(), rel=0.02)


def test_spread_keeps_rates_inside_the_unit_interval() -> None:
    out = probit_draws(arr(1.0), arr(1.0), np.random.default_rng(9), 5000, spread=5.0)
    assert np.isfinite(out).all()
    rates = cdf(out)
    assert rates.min() > 0
    assert rates.max() < 1
    # most draws are pushed to the clip at 1e-6 / 1 - 1e-6
    assert np.mean(np.abs(out) > 4.5) > 0.5


def test_probit_draws_follow_the_seed() -> None:
    alpha, beta = arr(2.0, 3.0), arr(5.0, 1.0)
    a = probit_draws(alpha, beta, np.random.default_rng(1), 4)
    b = probit_draws(alpha, beta, np.random.default_rng(1), 4)
    c = probit_draws(alpha, beta, np.random.default_rng(2), 4)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
