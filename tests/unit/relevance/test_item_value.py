from __future__ import annotations

import numpy as np
import pytest

from protocol.actions import CLICK_GRADE
from relevance.item_value import (
    MAX_RELATIVE_VALUE,
    VALUE_PRIOR_STRENGTH,
    mean_values,
    value_shift,
)
from relevance.normal import cdf, ppf


@pytest.mark.parametrize(
    ("engagements", "grades", "expected"),
    [
        (0.0, 0.0, 1.0),  # nothing known: a click's worth
        (10.0, 10 * CLICK_GRADE, 1.0),  # clicks only: exactly a click's worth
        (
            1.0,
            1.0,
            (1.0 + VALUE_PRIOR_STRENGTH * CLICK_GRADE) / (1 + VALUE_PRIOR_STRENGTH) / CLICK_GRADE,
        ),
        (100.0, 100.0, 101.25 / 105 / CLICK_GRADE),  # purchases: near four clicks' worth
        (100.0, 50.0, 51.25 / 105 / CLICK_GRADE),  # every engagement an add-to-cart
        (100.0, 0.0, 1.25 / 105 / CLICK_GRADE),  # graded worthless by the client: floored
        (-3.0, -1.0, 1.0),  # damaged negatives count as nothing
    ],
    ids=["unseen", "clicks", "one-purchase", "purchases", "carts", "worthless", "negative"],
)
def test_mean_values(engagements: float, grades: float, expected: float) -> None:
    got = mean_values(np.array([engagements]), np.array([grades]))
    assert got.tolist() == pytest.approx([max(expected, 1 / MAX_RELATIVE_VALUE)])


def test_one_purchase_lifts_an_item_less_than_a_record_of_them() -> None:
    one, many = mean_values(np.array([1.0, 20.0]), np.array([1.0, 20.0]))
    assert 1.0 < one < many <= 4.0


@pytest.mark.parametrize("rate", [0.001, 0.02, 0.2, 0.6])
@pytest.mark.parametrize("value", [0.5, 1.0, 2.0, 4.0])
def test_the_shift_ranks_by_expected_value(rate: float, value: float) -> None:
    mean = ppf(np.array([rate]))
    shifted = mean + value_shift(mean, np.array([value]))
    assert cdf(shifted).tolist() == pytest.approx([min(rate * value, 1 - 1e-6)], rel=1e-3)


def test_a_clicks_worth_moves_nothing_and_weight_zero_ignores_value() -> None:
    mean = np.array([-2.0, -1.0, 0.5])
    assert value_shift(mean, np.ones(3)).tolist() == [0.0, 0.0, 0.0]
    assert value_shift(mean, np.array([3.0, 0.2, 8.0]), weight=0).tolist() == [0.0, 0.0, 0.0]


def test_a_purchased_item_passes_a_clicked_one_engaged_with_a_little_more_often() -> None:
    # 3% engaged, worth purchases, against 4% engaged, worth clicks
    mean = ppf(np.array([0.03, 0.04]))
    value = np.array([4.0, 1.0])
    shifted = mean + value_shift(mean, value)
    assert shifted[0] > shifted[1]
    # ranked by engagement alone the clicked one stays ahead
    assert (mean + value_shift(mean, value, weight=0))[1] > mean[0]
