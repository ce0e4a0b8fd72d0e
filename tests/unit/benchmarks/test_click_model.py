from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.click_model import (
    ClickModel,
    attraction,
    examination,
    expected_clicks,
    sample_outcome,
    top_k,
)


@pytest.mark.parametrize(
    ("k", "power", "expected"),
    [
        (3, 0.7, [1.0, 2**-0.7, 3**-0.7]),
        (3, 0.0, [1.0, 1.0, 1.0]),
        (4, 1.0, [1.0, 1 / 2, 1 / 3, 1 / 4]),
        (1, 0.7, [1.0]),
    ],
)
def test_examination_falls_as_a_power_of_the_position(
    k: int, power: float, expected: list[float]
) -> None:
    assert examination(k, power) == pytest.approx(expected)


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


@pytest.mark.parametrize(
    ("preference", "bias", "scale", "expected"),
    [
        # items: z = (1, 0) quality 0; z = (0, 1) quality 0.5
        ([1.0, 0.0], -1.0, 2.0, [_sigmoid(1.0), _sigmoid(-0.5)]),
        ([0.0, 1.0], -1.0, 2.0, [_sigmoid(-1.0), _sigmoid(1.5)]),
        ([0.0, 0.0], 0.0, 5.0, [0.5, _sigmoid(0.5)]),  # no taste: quality alone
        ([1.0, 0.0], -4.3, 0.0, [_sigmoid(-4.3), _sigmoid(-3.8)]),
    ],
)
def test_attraction_is_a_sigmoid_of_bias_taste_and_quality(
    preference: list[float], bias: float, scale: float, expected: list[float]
) -> None:
    taste = np.array([[1.0, 0.0], [0.0, 1.0]])
    quality = np.array([0.0, 0.5])
    got = attraction(np.array([preference]), taste, quality, bias, scale)
    assert got.shape == (1, 2)
    assert got[0] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("attract", "examine", "expected"),
    [
        ([0.5, 0.2], [1.0, 0.5, 0.25], 0.6),
        ([0.5, 0.2, 0.4], [1.0, 0.5, 0.25], 0.7),
        ([], [1.0, 0.5], 0.0),  # an empty slate earns nothing
        ([1.0], [0.8], 0.8),
    ],
)
def test_expected_clicks_sum_examination_times_attraction(
    attract: list[float], examine: list[float], expected: float
) -> None:
    assert expected_clicks(np.array(attract), np.array(examine)) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("scores", "k", "expected"),
    [
        ([0.1, 0.9, 0.5, 0.7], 2, [1, 3]),
        ([0.1, 0.9, 0.5, 0.7], 4, [1, 3, 2, 0]),
        ([0.1, 0.9, 0.5, 0.7], 9, [1, 3, 2, 0]),
        ([0.3, 0.3, 0.3], 2, [0, 1]),  # ties: the lower row first
        ([-1.0, -3.0, -2.0], 1, [0]),
    ],
)
def test_top_k_is_highest_first(scores: list[float], k: int, expected: list[int]) -> None:
    assert top_k(np.array(scores), k).tolist() == expected


def test_outcomes_follow_the_click_model() -> None:
    rng = np.random.default_rng(5)
    attract = np.array([0.4, 0.2, 0.005])
    examine = np.array([1.0, 0.5, 0.8])
    model = ClickModel()
    draws = [sample_outcome(rng, attract, examine, model) for _ in range(40_000)]
    clicked = np.mean([d.clicked for d in draws], axis=0)
    assert clicked == pytest.approx(examine * attract, abs=0.006)
    carted = np.mean([d.carted for d in draws], axis=0)
    assert carted[0] == pytest.approx(0.4 * model.cart_given_click * 0.4, abs=0.006)
    dismissed = np.mean([d.dismissed for d in draws], axis=0)
    # Only the disliked item (below 1%) is dismissed, when looked at and not clicked.
    assert dismissed[:2].tolist() == [0.0, 0.0]
    assert dismissed[2] == pytest.approx(0.8 * 0.995 * model.dismiss_rate, abs=0.006)
    for d in draws[:500]:
        assert not (d.carted & ~d.clicked).any()
        assert not (d.purchased & ~d.carted).any()
        assert not (d.dismissed & d.clicked).any()
