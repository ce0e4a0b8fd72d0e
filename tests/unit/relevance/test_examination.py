from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relevance.examination import (
    MAX_IMPRESSIONS,
    MAX_POSITIONS,
    PRIOR,
    PRIOR_IMPRESSIONS,
    Tally,
    added,
    at,
    e_step,
    estimate,
    miss_weight,
)


def positions(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def test_the_prior_is_one_over_the_square_root_of_the_position() -> None:
    assert PRIOR.shape == (MAX_POSITIONS,)
    assert PRIOR[0] == 1.0
    assert PRIOR[3] == pytest.approx(0.5)
    assert PRIOR[99] == pytest.approx(0.1)


def test_without_evidence_the_estimate_is_the_prior() -> None:
    tally = Tally.empty()
    assert tally.examined.shape == tally.shown.shape == (MAX_POSITIONS,)
    np.testing.assert_allclose(estimate(tally), PRIOR)


def test_the_estimate_is_pulled_toward_the_prior_by_pseudo_impressions() -> None:
    examined, shown = np.zeros(MAX_POSITIONS), np.zeros(MAX_POSITIONS)
    # position 1 always examined; position 2 examined 30% of 200 impressions
    examined[0], shown[0] = 200.0, 200.0
    examined[1], shown[1] = 60.0, 200.0
    e = estimate(Tally(examined, shown))
    assert e[0] == 1.0
    expected = (60.0 + PRIOR_IMPRESSIONS * PRIOR[1]) / (200.0 + PRIOR_IMPRESSIONS)
    assert e[1] == pytest.approx(expected)
    assert 0.3 < e[1] < PRIOR[1]


def test_the_estimate_is_relative_to_position_one_and_clipped() -> None:
    n = 1e6
    shown = np.full(MAX_POSITIONS, n)
    examined = np.full(MAX_POSITIONS, 0.5 * n)
    examined[1] = n  # more often examined than position 1: clipped to 1
    examined[2] = 0.0  # never: clipped to 1e-3
    e = estimate(Tally(examined, shown))
    assert e[0] == 1.0
    assert e[1] == 1.0
    assert e[2] == pytest.approx(1e-3)
    # positions examined as often as position 1 (half the time each) are e = 1 by scale
    assert e[5] == pytest.approx(1.0, abs=1e-3)
    assert ((e > 0) & (e <= 1)).all()


@pytest.mark.parametrize(
    ("pos", "expected_index"),
    [(1, 0), (2, 1), (100, 99), (101, 99), (5000, 99), (0, 0), (-3, 0)],
    ids=["first", "second", "last", "one-beyond", "far-beyond", "zero", "negative"],
)
def test_at_reads_one_based_positions(pos: int, expected_index: int) -> None:
    probs = np.linspace(1.0, 0.01, MAX_POSITIONS)
    assert at(probs, positions(pos))[0] == probs[expected_index]


@pytest.mark.parametrize(
    ("examine", "attract", "expected"),
    [
        (1.0, 0.3, 1.0),  # a position always looked at was examined, engaged or not
        (0.5, 0.0, 0.5),  # nothing attractive: no engagement says nothing
        (0.0, 0.5, 0.0),  # never looked at
        (1.0, 1.0, 0.0),  # looked at and certain to engage, yet no engagement
        (0.5, 0.5, 0.25 / 0.75),
        (0.8, 0.2, 0.64 / 0.84),
    ],
    ids=["always-examined", "unattractive", "never-examined", "impossible", "even", "typical"],
)
def test_miss_weight(examine: float, attract: float, expected: float) -> None:
    got = miss_weight(np.array([examine]), np.array([attract]))
    assert float(got[0]) == pytest.approx(expected)


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=0.0, max_value=1.0), st.floats(min_value=0.0, max_value=1.0))
def test_miss_weight_is_bayes_rule(examine: float, attract: float) -> None:
    w = float(miss_weight(np.array([examine]), np.array([attract]))[0])
    # P(examined | no engagement) = P(examined, no engagement) / P(no engagement)
    joint = examine * (1 - attract)
    none = joint + (1 - examine)
    assert 0.0 <= w <= examine + 1e-12
    if none > 1e-6:
        assert w == pytest.approx(joint / none, rel=1e-9, abs=1e-12)


def test_e_step_counts_one_decision() -> None:
    probs = estimate(Tally.empty())
    pos = positions(1, 2, 3, 150)
    engaged = np.array([False, True, False, False])
    attract = np.array([0.2, 0.4, 0.0, 0.1])
    t = e_step(pos, engaged, attract, probs)
    assert t.shown[:3].tolist() == [1.0, 1.0, 1.0]
    assert t.shown[99] == 1.0  # beyond the last position: counted there
    assert t.shown.sum() == 4.0
    assert t.examined[0] == pytest.approx(float(miss_weight(probs[:1], attract[:1])[0]))
    assert t.examined[1] == 1.0  # an engagement was examined
    assert t.examined[2] == pytest.approx(probs[2])  # unattractive: the prior examination
    assert t.examined[99] == pytest.approx(float(miss_weight(probs[99:], attract[3:])[0]))
    assert t.examined[3:99].sum() == 0.0


def test_e_step_adds_up_repeated_positions() -> None:
    probs = np.ones(MAX_POSITIONS)
    t = e_step(positions(2, 2, 2), np.array([True, False, False]), np.zeros(3), probs)
    assert t.shown[1] == 3.0
    assert t.examined[1] == 3.0  # examined for certain at a position always looked at


def test_added_sums_tallies() -> None:
    a = Tally(np.full(MAX_POSITIONS, 2.0), np.full(MAX_POSITIONS, 4.0))
    b = Tally(np.full(MAX_POSITIONS, 1.0), np.full(MAX_POSITIONS, 3.0))
    out = added(a, b)
    assert (out.examined == 3.0).all()
    assert (out.shown == 7.0).all()
    assert (a.examined == 2.0).all()  # the inputs are left alone


def test_added_scales_a_position_down_past_max_impressions() -> None:
    shown = np.zeros(MAX_POSITIONS)
    examined = np.zeros(MAX_POSITIONS)
    shown[0], examined[0] = MAX_IMPRESSIONS, MAX_IMPRESSIONS * 0.9
    shown[1], examined[1] = 10.0, 5.0
    more = Tally(np.zeros(MAX_POSITIONS), np.zeros(MAX_POSITIONS))
    more.shown[0], more.examined[0] = MAX_IMPRESSIONS, 0.1 * MAX_IMPRESSIONS
    out = added(Tally(examined, shown), more)
    assert out.shown[0] == pytest.approx(MAX_IMPRESSIONS)
    # the rate is kept: (0.9 + 0.1) / 2 of the impressions
    assert out.examined[0] / out.shown[0] == pytest.approx(0.5)
    # a position below the cap is not touched
    assert (out.shown[1], out.examined[1]) == (10.0, 5.0)


def simulate(
    rng: np.random.Generator,
    true: np.ndarray,
    decisions: int,
    low: np.ndarray | float = 0.05,
    high: np.ndarray | float = 0.6,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Slates of len(true) positions under the position-based model: positions, engaged,
    and each shown item's attractiveness (what the user model predicts), uniform in
    [low, high) (per position when arrays)."""
    k = true.shape[0]
    pos = np.tile(np.arange(1, k + 1, dtype=np.int64), decisions)
    lo = np.broadcast_to(low, (k,))[pos - 1]
    hi = np.broadcast_to(high, (k,))[pos - 1]
    attract = rng.uniform(lo, hi)
    examined = rng.random(pos.size) < true[pos - 1]
    engaged = examined & (rng.random(pos.size) < attract)
    return pos, engaged, attract


def test_em_recovers_the_examination_probabilities() -> None:
    rng = np.random.default_rng(0)
    true = 1.0 / (1.0 + 0.35 * np.arange(10))
    pos, engaged, attract = simulate(rng, true, 20_000)
    probs = estimate(Tally.empty())
    previous = probs
    for _ in range(40):
        previous, probs = probs, estimate(e_step(pos, engaged, attract, probs))
    # converged, and to the truth within the noise of 20,000 impressions a position
    assert np.abs(probs - previous).max() < 1e-3
    np.testing.assert_allclose(probs[:10], true, atol=0.025)
    # the positions never shown stay at the prior
    np.testing.assert_allclose(probs[10:], PRIOR[10:])


def test_em_tells_position_bias_from_unattractive_items() -> None:
    # positions 2 and 3 get the same engagement rate (~22%): dull items at a position nearly
    # always looked at, attractive ones at a position rarely looked at. Knowing how
    # attractive each item was, EM attributes the rates to examination correctly.
    rng = np.random.default_rng(1)
    true = np.array([1.0, 0.9, 0.32])
    low, high = np.array([0.05, 0.15, 0.5]), np.array([0.6, 0.35, 0.9])
    pos, engaged, attract = simulate(rng, true, 30_000, low, high)
    assert engaged[pos == 2].mean() == pytest.approx(engaged[pos == 3].mean(), abs=0.01)
    probs = estimate(Tally.empty())
    for _ in range(40):
        probs = estimate(e_step(pos, engaged, attract, probs))
    # a miss of a dull item says little, so the prior's pseudo-impressions weigh more there
    # (a pull of ~0.03 toward 1/sqrt(2) at position 2): a looser tolerance
    np.testing.assert_allclose(probs[:3], true, atol=0.05)
    assert probs[1] > 2.5 * probs[2]


def test_em_from_incremental_tallies() -> None:
    # the workers add each decision's e-step to a running tally under the current estimate
    rng = np.random.default_rng(2)
    true = np.array([1.0, 0.7, 0.5, 0.4])
    tally = Tally.empty()
    probs = estimate(tally)
    for _ in range(40):
        pos, engaged, attract = simulate(rng, true, 1000)
        tally = added(tally, e_step(pos, engaged, attract, probs))
        probs = estimate(tally)
    # the early batches were scored under a poor estimate: a looser tolerance
    np.testing.assert_allclose(probs[:4], true, atol=0.05)
