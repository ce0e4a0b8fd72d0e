"""The Open Bandit check's pure parts on small synthetic logs: parsing, the target tables,
the reward model and the one-position log. No download: the real data is read only when a
wheel is already in the cache."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.open_bandit import (
    cross_fitted,
    one_position_log,
    position_shares,
    shrunk_rates,
    top_k_marginals,
)
from benchmarks.open_bandit_data import CACHE, WHEEL, BanditLog, parse_log, parse_prior, read_log
from evaluation.estimators import ips, snips


def bandit_log(
    item: list[int], position: list[int], click: list[float], propensity: list[float]
) -> BanditLog:
    return BanditLog(
        item=np.array(item, dtype=np.int64),
        position=np.array(position, dtype=np.int64),
        click=np.array(click),
        propensity=np.array(propensity),
    )


CSV = (
    ",timestamp,item_id,position,click,propensity_score,user_feature_0\n"
    "0,2019-11-24 00:00:34+00:00,14,3,0,0.0125,abc\n"
    "1,2019-11-24 00:00:53+00:00,7,1,1,0.25,def\n"
)


def test_parse_log_reads_the_columns_and_counts_positions_from_zero() -> None:
    log = parse_log(CSV)
    assert log.item.tolist() == [14, 7]
    assert log.position.tolist() == [2, 0]
    assert log.click.tolist() == [0.0, 1.0]
    assert log.propensity.tolist() == [0.0125, 0.25]


PRIOR = """\
all:
  alpha:
    - 47.0
    - 8.0
  beta:
    - 12198.0
    - 3566.0
men:
  alpha:
    - 1.0
  beta:
    - 2.0
"""


@pytest.mark.parametrize(
    ("campaign", "alpha", "beta"),
    [("all", [47.0, 8.0], [12198.0, 3566.0]), ("men", [1.0], [2.0])],
)
def test_parse_prior(campaign: str, alpha: list[float], beta: list[float]) -> None:
    a, b = parse_prior(PRIOR, campaign)
    assert a.tolist() == alpha
    assert b.tolist() == beta


def test_parse_prior_names_a_missing_campaign() -> None:
    with pytest.raises(ValueError, match="women"):
        parse_prior(PRIOR, "women")


@pytest.mark.parametrize(
    ("item", "position", "expected"),
    [
        # Position 0: items 0, 0, 1 -> 2/3, 1/3; position 1: item 2 alone.
        ([0, 0, 1, 2], [0, 0, 0, 1], [[2 / 3, 0], [1 / 3, 0], [0, 1]]),
        # A position never shown keeps zeros rather than dividing by nothing.
        ([1, 1], [0, 0], [[0, 0], [1, 0], [0, 0]]),
    ],
)
def test_position_shares(item: list[int], position: list[int], expected: list[list[float]]) -> None:
    log = bandit_log(item, position, [0.0] * len(item), [1.0] * len(item))
    assert np.allclose(position_shares(log, items=3, positions=2), expected)


@pytest.mark.parametrize(
    ("strength", "expected_item0", "expected_item1"),
    [
        # Position 0 saw 4 shows, 1 click: rate 1/4. Item 0: 1 click in 2; item 1: 0 in 2.
        (0.0, 0.5, 0.0),
        (2.0, (1 + 2 * 0.25) / (2 + 2), (0 + 2 * 0.25) / (2 + 2)),
        (1e9, 0.25, 0.25),
    ],
)
def test_shrunk_rates(strength: float, expected_item0: float, expected_item1: float) -> None:
    log = bandit_log([0, 0, 1, 1], [0, 0, 0, 0], [1, 0, 0, 0], [0.5] * 4)
    rates = shrunk_rates(log, strength, items=3, positions=1)
    assert rates[0, 0] == pytest.approx(expected_item0)
    assert rates[1, 0] == pytest.approx(expected_item1)
    assert rates[2, 0] == pytest.approx(0.25)  # never shown: the position's rate


def test_top_k_marginals_sum_to_one_per_position_and_follow_the_best_item() -> None:
    # Item 2's rate is far above the others': it is first in (almost) every draw.
    alpha = np.array([1.0, 1.0, 900.0, 1.0])
    beta = np.array([99.0, 99.0, 100.0, 99.0])
    marginals = top_k_marginals(alpha, beta, 2, 20_000, np.random.default_rng(0))
    assert marginals.shape == (4, 2)
    assert np.allclose(marginals.sum(axis=0), 1.0)
    assert marginals[2, 0] > 0.999
    # The rest share the second position about evenly.
    assert np.allclose(marginals[[0, 1, 3], 1], 1 / 3, atol=0.02)


def test_one_position_log_makes_ips_the_weighted_click_rate_per_impression() -> None:
    log = bandit_log([0, 1, 2, 1], [0, 1, 0, 1], [1, 0, 1, 1], [0.5, 0.25, 0.5, 0.25])
    target = np.array([[1.0, 0.0], [0.0, 0.5], [0.0, 0.5]])
    slate = one_position_log(log, target)
    assert slate.logged.shape == (4, 1)
    # Weights: 2, 2, 0, 2; clicks 1, 0, 1, 1 -> (2 + 0 + 0 + 2) / 4.
    assert ips(slate) == pytest.approx(1.0)
    assert snips(slate) == pytest.approx(4 / 6)


def test_cross_fitted_predicts_each_half_from_the_other() -> None:
    # Item 0 always clicked, item 1 never, both at position 0: with no shrinkage each half's
    # model has seen both items in the other half, so predictions are the true rates.
    n = 400
    item = [i % 2 for i in range(n)]
    log = bandit_log(item, [0] * n, [1.0 - i for i in item], [0.5] * n)
    target = np.array([[0.25], [0.75]])
    predicted, predicted_target = cross_fitted(log, target, 0.0, np.random.default_rng(1))
    assert np.allclose(predicted, log.click)
    assert np.allclose(predicted_target, 0.25)


@pytest.mark.skipif(not (CACHE / WHEEL).exists(), reason="the obp wheel is not in the cache")
def test_the_cached_random_log_is_uniform_over_80_items() -> None:
    log = read_log(CACHE / WHEEL, "random")
    assert len(log) == 10_000
    assert np.allclose(log.propensity, 1 / 80)
    assert set(log.position.tolist()) == {0, 1, 2}
