from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relevance.normal import cdf, pdf, ppf, v_w, v_w_one

STANDARD = NormalDist()


def exact_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def exact_v_w(t: float) -> tuple[float, float]:
    """The textbook factors, φ(t)/Φ(t) and v (v + t), from the standard library."""
    v = math.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi) / exact_cdf(t)
    return v, v * (v + t)


def test_pdf_is_the_standard_normal_density() -> None:
    x = np.linspace(-8.0, 8.0, 161)
    expected = [STANDARD.pdf(float(v)) for v in x]
    np.testing.assert_allclose(pdf(x), expected, rtol=1e-12)


def test_cdf_agrees_with_erf_to_its_stated_accuracy() -> None:
    x = np.linspace(-10.0, 10.0, 4001)
    expected = np.array([0.5 * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x])
    assert np.abs(cdf(x) - expected).max() < 1.5e-7


@pytest.mark.parametrize(
    ("x", "expected"),
    [(0.0, 0.5), (-40.0, 0.0), (40.0, 1.0), (1.959963984540054, 0.975)],
    ids=["centre", "far-left", "far-right", "two-sided-95"],
)
def test_cdf_values(x: float, expected: float) -> None:
    assert float(cdf(np.array([x]))[0]) == pytest.approx(expected, abs=1.5e-7)


def test_cdf_is_symmetric_and_monotone() -> None:
    x = np.linspace(-9.0, 9.0, 3601)
    c = cdf(x)
    np.testing.assert_allclose(c + cdf(-x), 1.0, atol=1e-15)
    assert (np.diff(c) >= 0).all()
    assert ((c >= 0) & (c <= 1)).all()


@pytest.mark.parametrize(
    "p",
    [1e-12, 1e-9, 1e-6, 1e-3, 0.02, 0.02425, 0.1, 0.3, 0.5, 0.7, 0.97575, 0.999, 1 - 1e-9],
)
def test_ppf_matches_the_inverse_normal(p: float) -> None:
    # every region of the rational approximation (low tail, centre, high tail) and its seams
    expected = STANDARD.inv_cdf(p)
    got = float(ppf(np.array([p]))[0])
    assert got == pytest.approx(expected, rel=2e-9, abs=1e-12)


@pytest.mark.parametrize(
    ("p", "bound"),
    [(0.0, 1e-12), (-0.5, 1e-12), (1.0, 1 - 1e-12), (3.0, 1 - 1e-12)],
    ids=["zero", "negative", "one", "above-one"],
)
def test_ppf_clips_outside_the_open_interval(p: float, bound: float) -> None:
    got = ppf(np.array([p]))
    assert np.isfinite(got).all()
    assert float(got[0]) == pytest.approx(STANDARD.inv_cdf(bound), rel=1e-6)


def test_ppf_keeps_the_shape_and_order_of_its_input() -> None:
    p = np.array([[0.9, 0.01], [0.5, 0.2]])
    out = ppf(p)
    assert out.shape == (2, 2)
    assert out[1, 0] == 0.0
    assert out[0, 0] > out[1, 0] > out[1, 1] > out[0, 1]


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=1e-9, max_value=1 - 1e-9))
def test_ppf_and_cdf_are_inverses(p: float) -> None:
    x = ppf(np.array([p]))
    # cdf's absolute error bounds the round trip
    assert abs(float(cdf(x)[0]) - p) < 2e-7


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=-8.0, max_value=8.0))
def test_cdf_then_ppf_comes_back(x: float) -> None:
    back = float(ppf(cdf(np.array([x])))[0])
    # through the slope of Φ: an absolute error of 1.5e-7 in Φ(x) moves x by that / φ(x)
    assert back == pytest.approx(x, abs=2e-7 / STANDARD.pdf(x) + 1e-9)


@pytest.mark.parametrize(
    "t", [-30.0, -12.0, -8.0, -7.0, -6.0, -5.0, -4.0, -3.0, -2.0, -1.0, 0.0, 1.0, 3.0, 6.0]
)
def test_v_w_match_the_textbook_formulas(t: float) -> None:
    v, w = v_w(np.array([t]))
    expected_v, expected_w = exact_v_w(t)
    assert float(v[0]) == pytest.approx(expected_v, rel=1e-5, abs=1e-12)
    assert float(w[0]) == pytest.approx(expected_w, abs=5e-5)


def test_v_w_at_zero() -> None:
    v, w = v_w(np.array([0.0]))
    assert float(v[0]) == pytest.approx(math.sqrt(2.0 / math.pi))
    assert float(w[0]) == pytest.approx(2.0 / math.pi)


@pytest.mark.parametrize("t", [-1e3, -1e6, -1e12])
def test_v_w_far_below_where_the_cdf_underflows(t: float) -> None:
    # v tends to -t (and stays finite), w to 1: a very surprising observation is fully
    # informative, it must not leave the variance where it was
    v, w = v_w(np.array([t]))
    assert float(v[0]) == pytest.approx(-t, rel=1e-6)
    assert float(w[0]) == pytest.approx(1.0, abs=1e-5)


def test_v_w_are_smooth_across_the_tail_seam() -> None:
    t = np.linspace(-12.0, 4.0, 16_001)
    v, w = v_w(t)
    assert np.isfinite(v).all()
    assert ((w >= 0) & (w <= 1)).all()
    # v decreases, w decreases, with no jump anywhere (step 1e-3, slopes at most 1)
    assert (np.diff(v) < 0).all()
    assert (np.diff(w) <= 1e-12).all()
    assert np.abs(np.diff(v)).max() < 2e-3
    assert np.abs(np.diff(w)).max() < 1e-3


def test_v_w_are_elementwise() -> None:
    t = np.array([-9.0, -1.5, 0.0, 2.5])
    v, w = v_w(t)
    for i, ti in enumerate(t):
        vi, wi = v_w(np.array([ti]))
        assert (v[i], w[i]) == (vi[0], wi[0])


@pytest.mark.parametrize(
    "t", [-1e12, -1e3, -30.0, -8.0, -2.0000001, -2.0, -1.9999999, -1.0, -1e-9, 0.0, 1e-9, 0.5, 6.0]
)
def test_the_scalar_factors_are_the_vectorised_ones(t: float) -> None:
    v, w = v_w(np.array([t]))
    assert v_w_one(t) == (
        pytest.approx(float(v[0]), rel=1e-13),
        pytest.approx(float(w[0]), abs=1e-13),
    )


@given(st.floats(min_value=-1e6, max_value=40.0, allow_nan=False))
@settings(max_examples=300)
def test_the_scalar_factors_agree_everywhere(t: float) -> None:
    v, w = v_w(np.array([t]))
    one_v, one_w = v_w_one(t)
    assert one_v == pytest.approx(float(v[0]), rel=1e-12, abs=1e-300)
    assert one_w == pytest.approx(float(w[0]), abs=1e-12)
