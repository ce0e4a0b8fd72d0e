from __future__ import annotations

import numpy as np
import pytest

from origin.learned.posteriors import (
    RANK_PRIOR_MEAN,
    PosteriorConfig,
    Posteriors,
    decayed,
    effective,
    with_cold_priors,
)

CONFIG = PosteriorConfig()
WEEK_S = 7 * 86_400.0
WEEK_MS = WEEK_S * 1000


def posteriors(
    alpha: list[float],
    beta: list[float],
    observed: list[bool],
    updated_ms: list[float] | None = None,
) -> Posteriors:
    return Posteriors(
        alpha=np.array(alpha, np.float64),
        beta=np.array(beta, np.float64),
        updated_ms=np.array(updated_ms if updated_ms is not None else [0.0] * len(alpha)),
        observed=np.array(observed, bool),
    )


def mean(alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    out: np.ndarray = alpha / (alpha + beta)
    return out


def test_the_default_configuration() -> None:
    assert (CONFIG.prior_alpha, CONFIG.prior_beta) == (1.0, 1.0)
    assert CONFIG.decay_half_life_s == WEEK_S
    assert CONFIG.cold_prior_strength == 4.0
    assert CONFIG.shrink_strength == 10.0


def test_the_prior_posteriors() -> None:
    config = PosteriorConfig(prior_alpha=2.0, prior_beta=3.0)
    p = Posteriors.prior(3, config)
    assert p.alpha.tolist() == [2.0] * 3
    assert p.beta.tolist() == [3.0] * 3
    assert p.updated_ms.tolist() == [0.0] * 3
    assert not p.observed.any()


def test_from_rows_reads_stored_rows_and_takes_the_prior_for_the_rest() -> None:
    rows = np.array(
        [
            [5.0, 7.0, 1000.0],  # stored
            [0.0, 0.0, 0.0],  # missing: the script's 24 zero bytes
            [-1.0, 3.0, 50.0],  # damaged
            [2.0, 0.0, 60.0],  # damaged
            [0.5, 0.25, 70.0],  # decayed below the prior is still evidence
        ]
    )
    p = Posteriors.from_rows(rows, CONFIG)
    assert p.observed.tolist() == [True, False, False, False, True]
    assert p.alpha.tolist() == [5.0, 1.0, 1.0, 1.0, 0.5]
    assert p.beta.tolist() == [7.0, 1.0, 1.0, 1.0, 0.25]
    assert p.updated_ms.tolist() == [1000.0, 0.0, 0.0, 0.0, 70.0]


def test_from_rows_of_nothing() -> None:
    p = Posteriors.from_rows(np.empty((0, 3)), CONFIG)
    assert p.alpha.shape == p.beta.shape == p.observed.shape == (0,)


@pytest.mark.parametrize(
    ("half_life_s", "age_ms", "expected_alpha", "expected_beta"),
    [
        (WEEK_S, 0.0, 11.0, 5.0),
        (WEEK_S, WEEK_MS, 6.0, 3.0),  # evidence halves: 1 + (11 - 1) / 2
        (WEEK_S, 2 * WEEK_MS, 3.5, 2.0),
        (WEEK_S, WEEK_MS / 2, 1 + 10 * 2**-0.5, 1 + 4 * 2**-0.5),
        (WEEK_S, -WEEK_MS, 11.0, 5.0),  # a clock behind the store never grows evidence
        (0.0, 52 * WEEK_MS, 11.0, 5.0),  # decay disabled
        (-1.0, 52 * WEEK_MS, 11.0, 5.0),
    ],
    ids=[
        "no-age",
        "one-half-life",
        "two-half-lives",
        "half-a-half-life",
        "negative-age",
        "disabled",
        "negative-disabled",
    ],
)
def test_decayed_shrinks_toward_the_prior(
    half_life_s: float, age_ms: float, expected_alpha: float, expected_beta: float
) -> None:
    config = PosteriorConfig(decay_half_life_s=half_life_s)
    now = 1e12
    before = posteriors([11.0, 11.0], [5.0, 5.0], [True, False], [now - age_ms, now - age_ms])
    after = decayed(before, now, config)
    assert after.alpha[0] == pytest.approx(expected_alpha)
    assert after.beta[0] == pytest.approx(expected_beta)
    # an unobserved item holds whatever it holds, untouched
    assert (after.alpha[1], after.beta[1]) == (11.0, 5.0)
    assert np.array_equal(after.observed, before.observed)
    assert np.array_equal(after.updated_ms, before.updated_ms)


def test_decay_keeps_the_rate_and_loses_the_certainty() -> None:
    # with a prior at the item's own rate the mean stays and only the evidence fades
    config = PosteriorConfig(prior_alpha=1.0, prior_beta=3.0)
    before = posteriors([41.0], [123.0], [True], [0.0])
    after = decayed(before, 3 * WEEK_MS, config)
    assert float(mean(after.alpha, after.beta)[0]) == pytest.approx(0.25)
    evidence = after.alpha + after.beta - 4.0
    assert float(evidence[0]) == pytest.approx(160.0 / 8)


def test_decay_goes_back_to_the_prior_in_the_long_run() -> None:
    before = posteriors([500.0, 1.0], [2.0, 900.0], [True, True], [0.0, 0.0])
    after = decayed(before, 100 * WEEK_MS, CONFIG)
    np.testing.assert_allclose(after.alpha, CONFIG.prior_alpha, atol=1e-9)
    np.testing.assert_allclose(after.beta, CONFIG.prior_beta, atol=1e-9)


def test_decay_is_per_item_by_its_own_age() -> None:
    now = 10 * WEEK_MS
    before = posteriors([11.0, 11.0], [1.0, 1.0], [True, True], [now, now - WEEK_MS])
    after = decayed(before, now, CONFIG)
    assert after.alpha.tolist() == pytest.approx([11.0, 6.0])


@pytest.mark.parametrize(
    ("alpha", "beta", "observed", "category", "inherited"),
    [
        # cold item 2 inherits its category's rate: 8 engagements in 10 examinations
        ([9.0, 1.0, 1.0], [3.0, 9.0, 1.0], [True, True, False], [0, 1, 0], 0.8),
        # category 1 has nothing observed: the evidence-weighted overall rate, 8 of 16
        ([9.0, 1.0, 1.0], [1.0, 9.0, 1.0], [True, True, False], [0, 0, 1], 0.5),
        # evidence-weighted: 8 of 8 and 1 of 2 are 9 of 10, not the mean of the rates
        ([9.0, 2.0, 1.0], [1.0, 2.0, 1.0], [True, True, False], [0, 0, 0], 0.9),
        # nothing observed anywhere: a typical engagement rate
        ([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [False, False, False], [0, 1, 0], RANK_PRIOR_MEAN),
        # observed but without evidence (decayed away): as if nothing were observed
        ([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [True, False, False], [0, 0, 0], RANK_PRIOR_MEAN),
        # a perfect category is not certain: clipped inside (0, 1)
        ([21.0, 1.0], [1.0, 1.0], [True, False], [3, 3], 0.999),
        ([1.0, 1.0], [21.0, 1.0], [True, False], [3, 3], 1e-3),
    ],
    ids=[
        "category-rate",
        "fallback-overall-rate",
        "evidence-weighted",
        "nothing-observed",
        "no-evidence",
        "clipped-high",
        "clipped-low",
    ],
)
def test_cold_priors_inherit(
    alpha: list[float],
    beta: list[float],
    observed: list[bool],
    category: list[int],
    inherited: float,
) -> None:
    before = posteriors(alpha, beta, observed)
    after = with_cold_priors(before, np.array(category), CONFIG)
    strength = CONFIG.cold_prior_strength
    for i, was_observed in enumerate(observed):
        # The flat prior gives way to the inherited pseudo-observations; an observed item
        # keeps its own evidence on top of them.
        if was_observed:
            evidence = alpha[i] + beta[i] - CONFIG.prior_alpha - CONFIG.prior_beta
            assert after.alpha[i] + after.beta[i] == pytest.approx(evidence + strength)
            assert after.alpha[i] >= alpha[i] - CONFIG.prior_alpha
            continue
        assert after.alpha[i] == pytest.approx(strength * inherited)
        assert after.beta[i] == pytest.approx(strength * (1 - inherited))
    assert np.array_equal(after.observed, before.observed)


def test_cold_priors_follow_the_configured_strength() -> None:
    config = PosteriorConfig(cold_prior_strength=20.0)
    before = posteriors([31.0, 1.0], [71.0, 1.0], [True, False])
    after = with_cold_priors(before, np.array([0, 0]), config)
    assert (after.alpha[1], after.beta[1]) == pytest.approx((20 * 0.3, 20 * 0.7))
    assert (after.alpha[0], after.beta[0]) == pytest.approx((30 + 20 * 0.3, 70 + 20 * 0.7))


def test_cold_priors_leave_no_items_alone() -> None:
    before = posteriors([], [], [])
    assert with_cold_priors(before, np.array([], dtype=np.int64), CONFIG) is before


def test_a_barely_seen_item_ranks_near_its_category_not_at_even_odds() -> None:
    # 300 engagements in 10,000 examinations (3%), and an item examined twice, unengaged
    before = posteriors([301.0, 1.0], [9701.0, 3.0], [True, True])
    after = with_cold_priors(before, np.array([0, 0]), CONFIG)
    barely = float(mean(after.alpha, after.beta)[1])
    assert barely < 0.03  # Beta(1, 1) + 2 misses would say 1 in 4
    assert barely == pytest.approx(4 * 0.03 / (2 + 4), rel=0.05)


def test_cold_priors_with_sparse_category_codes() -> None:
    before = posteriors([5.0, 1.0, 1.0], [1.0, 1.0, 1.0], [True, False, False])
    after = with_cold_priors(before, np.array([7, 7, 2]), CONFIG)
    strength = CONFIG.cold_prior_strength
    # category 7's rate is 4 of 4, clipped below certainty
    assert after.alpha[1] == pytest.approx(strength * 0.999)
    # category 2 has nothing observed: the overall rate (the same single item here)
    assert after.alpha[2] == pytest.approx(after.alpha[1])


def test_effective_without_cell_evidence_is_the_all_context_rate() -> None:
    now = 1e12
    everywhere = posteriors([31.0, 3.0], [11.0, 9.0], [True, True], [now, now])
    cell = Posteriors.prior(2, CONFIG)
    alpha, beta = effective(cell, everywhere, np.array([0, 0]), now, CONFIG)
    base = with_cold_priors(everywhere, np.array([0, 0]), CONFIG)
    np.testing.assert_allclose(mean(alpha, beta), mean(base.alpha, base.beta))
    # held by shrink_strength pseudo-observations
    np.testing.assert_allclose(alpha + beta, CONFIG.shrink_strength)


def test_effective_with_much_cell_evidence_is_the_cells_rate() -> None:
    now = 1e12
    everywhere = posteriors([80.0], [20.0], [True], [now])  # 0.8 over all contexts
    cell = posteriors([1001.0], [9001.0], [True], [now])  # 0.1 in this cell
    alpha, beta = effective(cell, everywhere, np.array([0]), now, CONFIG)
    assert float(mean(alpha, beta)[0]) == pytest.approx(0.1, abs=2e-3)
    # a thin cell is mostly the all-context rate
    thin = posteriors([2.0], [3.0], [True], [now])  # 1 in 3
    alpha, beta = effective(thin, everywhere, np.array([0]), now, CONFIG)
    base = with_cold_priors(everywhere, np.array([0]), CONFIG)
    rate = float(mean(base.alpha, base.beta)[0])  # 79 of 98 over the flat prior
    assert rate == pytest.approx(79 / 98)
    assert float(mean(alpha, beta)[0]) == pytest.approx((1 + 10 * rate) / (3 + 10))


def test_effective_gives_a_cold_item_its_neighbours_rate() -> None:
    now = 1e12
    everywhere = posteriors([31.0, 1.0], [71.0, 1.0], [True, False], [now, 0.0])
    cell = Posteriors.prior(2, CONFIG)
    alpha, beta = effective(cell, everywhere, np.array([5, 5]), now, CONFIG)
    # the cold item ranks like its category (30 of 100), not at Beta(1, 1)'s even odds
    assert float(mean(alpha, beta)[1]) == pytest.approx(0.3)
    assert float(mean(alpha, beta)[0]) == pytest.approx(0.3)


def test_effective_decays_both_cells() -> None:
    config = PosteriorConfig(shrink_strength=0.0)
    stored = 0.0
    everywhere = posteriors([81.0], [21.0], [True], [stored])
    cell = posteriors([41.0], [1.0], [True], [stored])
    fresh = effective(cell, everywhere, np.array([0]), stored, config)
    assert fresh[0][0] == pytest.approx(40.0)
    assert fresh[1][0] == pytest.approx(1e-3)  # no failures at all: floored
    later = effective(cell, everywhere, np.array([0]), stored + WEEK_MS, config)
    assert later[0][0] == pytest.approx(20.0)
    # forgotten in the long run: the item is back at its category's rate (its own, here,
    # decayed too), held by the cell's shrink toward it
    config = PosteriorConfig()
    alpha, beta = effective(cell, everywhere, np.array([0]), stored + 200 * WEEK_MS, config)
    assert float(alpha[0] + beta[0]) == pytest.approx(config.shrink_strength, abs=1e-3)
