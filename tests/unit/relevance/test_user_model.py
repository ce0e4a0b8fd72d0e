from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from protocol.exceptions import MalformedMessage
from relevance.normal import cdf
from relevance.user_model import (
    MIN_VAR_SHARE,
    PRIOR_SCALE,
    UserModel,
    draw,
    draws,
    model_bytes,
    model_from_bytes,
    relaxed,
    updated,
    with_prior,
)

DIM = 8
PRIOR_VAR = PRIOR_SCALE / DIM
STANDARD = NormalDist()


def unit(*values: float) -> np.ndarray:
    x = np.zeros(DIM, np.float32)
    x[: len(values)] = values
    return (x / np.linalg.norm(x)).astype(np.float32)


def observe(
    model: UserModel,
    x: np.ndarray,
    engaged: bool,
    *,
    baseline: float = -1.0,
    weight: float = 1.0,
) -> UserModel:
    return updated(
        model,
        x[None, :],
        np.array([baseline]),
        np.array([engaged]),
        np.array([weight]),
        prior_var=PRIOR_VAR,
    )


def graepel(
    mean: np.ndarray, var: np.ndarray, x: np.ndarray, b: float, y: int
) -> tuple[np.ndarray, np.ndarray]:
    """One probit ADF step with a diagonal covariance (Graepel et al. 2010, eqs. 7-8),
    written from the paper with the standard library's normal distribution."""
    s2 = 1.0 + float(np.sum(x * x * var))
    s = math.sqrt(s2)
    t = y * (b + float(mean @ x)) / s
    v = STANDARD.pdf(t) / STANDARD.cdf(t)
    w = v * (v + t)
    return mean + y * var * x * v / s, var * (1.0 - var * x * x / s2 * w)


def test_the_prior() -> None:
    model = UserModel.prior(DIM)
    assert model.dim == DIM
    assert model.mean.dtype == np.float32
    assert model.var.dtype == np.float32
    assert (model.mean == 0).all()
    np.testing.assert_allclose(model.var, PRIOR_SCALE / DIM)
    assert model.certainty(PRIOR_VAR) == pytest.approx(0.0)
    assert UserModel.prior(4, scale=2.0).var.tolist() == [0.5] * 4


@pytest.mark.parametrize(("share", "certainty"), [(1.0, 0.0), (0.5, 0.5), (0.1, 0.9)])
def test_certainty_is_the_share_of_prior_variance_removed(share: float, certainty: float) -> None:
    model = UserModel(np.zeros(DIM, np.float32), np.full(DIM, share * PRIOR_VAR, np.float32))
    assert model.certainty(PRIOR_VAR) == pytest.approx(certainty, abs=1e-6)


@pytest.mark.parametrize(
    ("engaged", "baseline"),
    [(True, -1.0), (False, -1.0), (True, -2.5), (False, 0.5), (True, 0.0)],
    ids=["engaged", "ignored", "engaged-rare-item", "ignored-popular-item", "engaged-even"],
)
def test_one_update_is_the_textbook_adf_step(engaged: bool, baseline: float) -> None:
    start = UserModel(
        np.linspace(-0.2, 0.3, DIM, dtype=np.float32),
        np.linspace(0.05, 0.15, DIM, dtype=np.float32),
    )
    x = unit(0.6, -0.8, 0.0, 0.3)
    out = observe(start, x, engaged, baseline=baseline)
    mean, var = graepel(
        start.mean.astype(float),
        start.var.astype(float),
        x.astype(float),
        baseline,
        1 if engaged else -1,
    )
    np.testing.assert_allclose(out.mean, mean, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(out.var, var, rtol=1e-5)
    assert out.mean.dtype == np.float32
    assert out.var.dtype == np.float32


def test_an_engagement_moves_the_mean_toward_the_item_and_narrows_it() -> None:
    prior = UserModel.prior(DIM)
    x = unit(0.6, 0.8)
    after = observe(prior, x, True)
    assert float(after.mean @ x) > 0
    # toward the item: the whole move is along its direction
    cosine = float(after.mean @ x) / float(np.linalg.norm(after.mean))
    assert cosine == pytest.approx(1.0, abs=1e-6)
    assert (after.var[:2] < prior.var[:2]).all()
    # the dimensions the item does not use are untouched
    assert (after.mean[2:] == 0).all()
    assert (after.var[2:] == prior.var[2:]).all()


def test_a_non_engagement_moves_the_mean_away_and_narrows_it() -> None:
    prior = UserModel.prior(DIM)
    x = unit(0.6, 0.8)
    after = observe(prior, x, False)
    assert float(after.mean @ x) < 0
    assert (after.var[:2] < prior.var[:2]).all()
    assert (after.var[2:] == prior.var[2:]).all()


def test_the_surprise_decides_the_step() -> None:
    # an engagement with an item few engage with teaches more than one with a popular item
    prior = UserModel.prior(DIM)
    x = unit(1.0)
    rare = observe(prior, x, True, baseline=-2.0)
    popular = observe(prior, x, True, baseline=1.0)
    assert float(rare.mean @ x) > float(popular.mean @ x) > 0


def test_an_engagement_far_beyond_the_prediction_still_narrows_the_variance() -> None:
    # t far below zero: w tends to 1 and the variance along the item drops; it must not be
    # left unchanged by the tail of the normal's ratio
    start = UserModel.prior(DIM)
    x = unit(1.0)
    after = observe(start, x, True, baseline=-12.0)
    assert np.isfinite(after.mean).all()
    assert float(after.mean[0]) > 0
    assert float(after.var[0]) < 0.95 * float(start.var[0])


@pytest.mark.parametrize("engaged", [True, False])
def test_the_weight_tempers_the_update(engaged: bool) -> None:
    prior = UserModel.prior(DIM)
    x = unit(0.6, 0.8)
    moves = [abs(float(observe(prior, x, engaged, weight=w).mean @ x)) for w in (0.0, 0.3, 1.0)]
    narrowing = [float(observe(prior, x, engaged, weight=w).var[0]) for w in (0.0, 0.3, 1.0)]
    assert moves[0] == 0.0 < moves[1] < moves[2]
    assert narrowing[0] == pytest.approx(PRIOR_VAR)
    assert narrowing[0] > narrowing[1] > narrowing[2]


@pytest.mark.parametrize("weight", [0.0, -0.5])
def test_an_observation_of_no_weight_changes_nothing(weight: float) -> None:
    start = UserModel(np.full(DIM, 0.1, np.float32), np.full(DIM, 0.05, np.float32))
    after = observe(start, unit(1.0, 1.0), False, weight=weight)
    assert np.array_equal(after.mean, start.mean)
    assert np.array_equal(after.var, start.var)


def test_observations_apply_in_order_as_a_sequence_of_single_updates() -> None:
    rng = np.random.default_rng(5)
    items = rng.standard_normal((6, DIM)).astype(np.float32)
    items /= np.linalg.norm(items, axis=1, keepdims=True)
    baselines = rng.normal(-1.0, 0.5, 6)
    engaged = np.array([True, False, False, True, False, True])
    weights = np.array([1.0, 0.4, 0.9, 1.0, 0.2, 1.0])
    batch = updated(UserModel.prior(DIM), items, baselines, engaged, weights, prior_var=PRIOR_VAR)
    one_by_one = UserModel.prior(DIM)
    for x, b, y, w in zip(items, baselines, engaged, weights, strict=True):
        one_by_one = observe(one_by_one, x, bool(y), baseline=float(b), weight=float(w))
    np.testing.assert_allclose(batch.mean, one_by_one.mean, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(batch.var, one_by_one.var, rtol=1e-6)


def test_updating_leaves_the_input_model_alone() -> None:
    start = UserModel.prior(DIM)
    before = (start.mean.copy(), start.var.copy())
    observe(start, unit(1.0), True)
    assert np.array_equal(start.mean, before[0])
    assert np.array_equal(start.var, before[1])


def test_misaligned_observations_are_refused() -> None:
    with pytest.raises(ValueError, match="zip"):
        updated(
            UserModel.prior(DIM),
            np.eye(DIM, dtype=np.float32)[:3],
            np.zeros(2),
            np.ones(3, bool),
            np.ones(3),
            prior_var=PRIOR_VAR,
        )


def test_the_variance_never_drops_below_its_floor() -> None:
    x = unit(1.0)
    floor = MIN_VAR_SHARE * PRIOR_VAR
    # near the floor already; alternating answers keep every step informative (w near
    # 2/pi), so 1/var grows by ~0.6 a step and would pass 1/floor within ~1,000 steps
    start = UserModel(np.zeros(DIM, np.float32), np.full(DIM, 1.1 * floor, np.float32))
    n = 2000
    model = updated(
        start,
        np.tile(x, (n, 1)),
        np.zeros(n),
        np.arange(n) % 2 == 0,
        np.ones(n),
        prior_var=PRIOR_VAR,
    )
    assert float(model.var[0]) == pytest.approx(floor, rel=1e-5)
    assert (model.var[1:] == start.var[1:]).all()
    # half the answers yes, half no, at baseline 0: θ · x stays near 0
    assert abs(float(model.mean @ x)) < 0.05


def test_the_model_learns_a_hidden_taste() -> None:
    rng = np.random.default_rng(3)
    dim = 16
    theta = rng.standard_normal(dim)
    theta *= 1.5 / np.linalg.norm(theta)
    n = 1500
    items = rng.standard_normal((n, dim))
    items /= np.linalg.norm(items, axis=1, keepdims=True)
    baselines = np.full(n, -1.0)
    engaged = rng.random(n) < cdf(baselines + items @ theta)
    model = updated(
        UserModel.prior(dim),
        items.astype(np.float32),
        baselines,
        engaged,
        np.ones(n),
        prior_var=1.0 / dim,
    )
    mean = model.mean.astype(np.float64)
    cosine = float(mean @ theta) / float(np.linalg.norm(mean) * np.linalg.norm(theta))
    assert cosine > 0.85
    assert model.certainty(1.0 / dim) > 0.5


def test_relaxed_moves_each_dimension_toward_its_own_prior_variance() -> None:
    """A population prior's marginal variances differ by dimension: each relaxes to its own."""
    model = UserModel(np.zeros(DIM, np.float32), np.full(DIM, 0.01, np.float32))
    prior = np.linspace(0.1, 0.8, DIM)
    half = relaxed(model, 3600.0, prior, 3600.0)
    np.testing.assert_allclose(half.var, 0.5 * 0.01 + 0.5 * prior, rtol=1e-6)
    assert half.var.dtype == np.float32


@pytest.mark.parametrize(
    ("elapsed_s", "half_life_s", "share_left"),
    [(0.0, 3600.0, 1.0), (3600.0, 3600.0, 0.5), (7200.0, 3600.0, 0.25), (1800.0, 3600.0, 2**-0.5)],
    ids=["no-time", "one-half-life", "two-half-lives", "half-a-half-life"],
)
def test_relaxed_moves_the_variance_toward_the_prior_by_the_half_life(
    elapsed_s: float, half_life_s: float, share_left: float
) -> None:
    var = np.linspace(0.01, 0.2, DIM, dtype=np.float32)  # some below, some above the prior
    mean = np.linspace(-1.0, 1.0, DIM, dtype=np.float32)
    model = UserModel(mean, var)
    out = relaxed(model, elapsed_s, PRIOR_VAR, half_life_s)
    # the distance to the prior's variance shrinks by 0.5 ** (elapsed / half-life)
    np.testing.assert_allclose(out.var - PRIOR_VAR, share_left * (var - PRIOR_VAR), atol=1e-7)
    assert np.array_equal(out.mean, mean)
    assert out.var.dtype == np.float32


@pytest.mark.parametrize(
    ("elapsed_s", "half_life_s"),
    [(3600.0, 0.0), (3600.0, -1.0), (-10.0, 3600.0)],
    ids=["no-half-life", "negative-half-life", "clock-behind"],
)
def test_relaxed_without_time_or_half_life_is_the_same_model(
    elapsed_s: float, half_life_s: float
) -> None:
    model = UserModel(np.ones(DIM, np.float32), np.full(DIM, 0.01, np.float32))
    assert relaxed(model, elapsed_s, PRIOR_VAR, half_life_s) is model


def test_relaxed_approaches_the_prior_monotonically() -> None:
    model = UserModel(np.zeros(DIM, np.float32), np.full(DIM, 0.001, np.float32))
    gaps = [
        float(np.abs(relaxed(model, days * 86_400.0, PRIOR_VAR, 86_400.0).var - PRIOR_VAR).max())
        for days in (0, 1, 2, 5, 30)
    ]
    assert gaps == sorted(gaps, reverse=True)
    assert gaps[-1] < 1e-9 + 1e-6 * PRIOR_VAR


def test_relaxing_restores_learnability() -> None:
    # a certain model relaxed for a long time moves on a new observation like a fresh one
    x = unit(1.0)
    certain = UserModel(np.zeros(DIM, np.float32), np.full(DIM, 1e-4, np.float32))
    stale = relaxed(certain, 30 * 86_400.0, PRIOR_VAR, 86_400.0)
    step_certain = float(observe(certain, x, True).mean @ x)
    step_stale = float(observe(stale, x, True).mean @ x)
    step_fresh = float(observe(UserModel.prior(DIM), x, True).mean @ x)
    assert step_certain < 0.01 * step_stale
    assert step_stale == pytest.approx(step_fresh, rel=1e-4)


def test_draw_without_spread_is_the_mean() -> None:
    model = UserModel(np.arange(DIM, dtype=np.float32), np.ones(DIM, np.float32))
    out = draw(model, np.random.default_rng(0), spread=0.0)
    assert np.array_equal(out, model.mean)


@pytest.mark.parametrize("spread", [1.0, 0.5, 2.0])
def test_draws_have_the_models_mean_and_scaled_variance(spread: float) -> None:
    mean = np.linspace(-1.0, 1.0, DIM, dtype=np.float32)
    var = np.linspace(0.01, 0.5, DIM, dtype=np.float32)
    model = UserModel(mean, var)
    n = 40_000
    out = draws(model, np.random.default_rng(11), n, spread)
    assert out.shape == (n, DIM)
    assert out.dtype == np.float32
    sd = spread * np.sqrt(var.astype(np.float64))
    # five standard errors of the mean; the variance within 5% (its standard error ~0.7%)
    assert (np.abs(out.mean(axis=0) - mean) < 5 * sd / math.sqrt(n)).all()
    np.testing.assert_allclose(out.var(axis=0), sd**2, rtol=0.05)
    # the dimensions are independent
    corr = np.corrcoef(out, rowvar=False)
    assert np.abs(corr - np.eye(DIM)).max() < 0.03


def test_draws_of_a_model_with_a_factor_have_its_whole_covariance() -> None:
    rng = np.random.default_rng(12)
    factor = rng.normal(0, 0.3, (DIM, 2)).astype(np.float32)
    var = np.full(DIM, 0.02, np.float32)
    model = UserModel(np.zeros(DIM, np.float32), var, factor)
    out = draws(model, np.random.default_rng(13), 60_000).astype(np.float64)
    expected = np.diag(var.astype(np.float64)) + factor.astype(np.float64) @ factor.T
    np.testing.assert_allclose(np.cov(out, rowvar=False), expected, atol=0.01)
    single = np.array([draw(model, rng) for _ in range(20_000)], np.float64)
    np.testing.assert_allclose(np.cov(single, rowvar=False), expected, atol=0.015)


def test_a_model_with_a_factor_is_not_stored_and_with_prior_scales_its_factor() -> None:
    factor = np.ones((DIM, 1), np.float32)
    model = UserModel(np.zeros(DIM, np.float32), np.full(DIM, 0.5, np.float32), factor)
    with pytest.raises(ValueError, match="factor"):
        model_bytes(model)
    wider = with_prior(model, PRIOR_VAR, 4 * PRIOR_VAR)
    assert wider.factor is not None
    np.testing.assert_allclose(wider.factor, 2 * factor)


def test_single_draws_have_the_models_distribution() -> None:
    model = UserModel(np.array([0.5, -2.0], np.float32), np.array([0.04, 1.0], np.float32))
    rng = np.random.default_rng(2)
    out = np.array([draw(model, rng) for _ in range(20_000)])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.mean(axis=0), [0.5, -2.0], atol=5 * 1.0 / math.sqrt(20_000))
    np.testing.assert_allclose(out.var(axis=0), [0.04, 1.0], rtol=0.05)


def test_draws_are_reproducible_from_the_seed() -> None:
    model = UserModel.prior(DIM)
    a = draws(model, np.random.default_rng(42), 5)
    b = draws(model, np.random.default_rng(42), 5)
    c = draws(model, np.random.default_rng(43), 5)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert np.array_equal(
        draw(model, np.random.default_rng(7)), draw(model, np.random.default_rng(7))
    )


@pytest.mark.parametrize("dim", [1, 4, 128])
def test_a_model_travels_as_float16_bytes(dim: int) -> None:
    rng = np.random.default_rng(dim)
    model = UserModel(
        rng.normal(0, 1, dim).astype(np.float32), rng.uniform(0.01, 1, dim).astype(np.float32)
    )
    raw = model_bytes(model)
    assert len(raw) == 4 * dim
    back = model_from_bytes(raw, dim)
    assert back.mean.tolist() == pytest.approx(model.mean.tolist(), rel=1e-3, abs=1e-3)
    assert back.var.tolist() == pytest.approx(model.var.tolist(), rel=1e-3, abs=1e-3)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"\x00" * 15, "dimension 4 is 16 bytes, not 15"),
        (np.array([0, 0, 0, 0, 1, 1, 1, 0], "<f2").tobytes(), "non-positive"),
        (np.array([np.nan, 0, 0, 0, 1, 1, 1, 1], "<f2").tobytes(), "non-finite"),
        (np.array([0, 0, 0, 0, 1, np.inf, 1, 1], "<f2").tobytes(), "non-finite"),
    ],
    ids=["short", "zero-variance", "nan-mean", "infinite-variance"],
)
def test_damaged_model_bytes_are_refused(raw: bytes, problem: str) -> None:
    with pytest.raises(MalformedMessage, match=problem):
        model_from_bytes(raw, 4)


# --- with_prior: a model learnt under one prior, read under another ---------------------


def gaussian_posterior(
    sums: np.ndarray, counts: np.ndarray, noise_var: float, prior_var: float
) -> UserModel:
    """The exact posterior of θ under N(0, prior_var · I) after ``counts[j]`` observations
    θ_j + N(0, noise_var) of each dimension j summing to ``sums[j]``: conjugate, so its
    covariance is diagonal."""
    var = 1.0 / (1.0 / prior_var + counts / noise_var)
    return UserModel((var * sums / noise_var).astype(np.float32), var.astype(np.float32))


def test_with_prior_is_the_identity_under_the_same_prior() -> None:
    model = UserModel(np.linspace(-1, 1, DIM, dtype=np.float32), np.full(DIM, 0.5, np.float32))
    assert with_prior(model, PRIOR_VAR, PRIOR_VAR) is model


@pytest.mark.parametrize("new_prior_var", [0.05, 1.0, PRIOR_VAR * 3, 400.0])
def test_with_prior_is_the_posterior_learnt_under_the_new_prior(new_prior_var: float) -> None:
    rng = np.random.default_rng(3)
    counts = np.array([0, 1, 2, 5, 10, 40, 3, 0], np.float64)
    sums = rng.normal(0.7, 1.0, DIM) * counts
    noise_var = 0.8
    learnt = gaussian_posterior(sums, counts, noise_var, PRIOR_VAR)
    expected = gaussian_posterior(sums, counts, noise_var, new_prior_var)
    got = with_prior(learnt, PRIOR_VAR, new_prior_var)
    np.testing.assert_allclose(got.var, expected.var, rtol=1e-5)
    np.testing.assert_allclose(got.mean, expected.mean, rtol=1e-5, atol=1e-7)
    # dimensions without evidence are the new prior itself
    assert got.var[0] == pytest.approx(new_prior_var, rel=1e-6)
    assert got.mean[0] == 0.0


def test_a_weaker_prior_moves_the_mean_further_from_zero_and_a_stronger_one_less() -> None:
    model = observe(UserModel.prior(DIM), unit(1.0, 0.5), engaged=True)
    model = observe(model, unit(1.0, -0.5), engaged=True)
    weaker = with_prior(model, PRIOR_VAR, 10 * PRIOR_VAR)
    stronger = with_prior(model, PRIOR_VAR, PRIOR_VAR / 10)
    moved = np.abs(model.mean) > 0
    assert moved.any()
    assert (np.abs(weaker.mean[moved]) > np.abs(model.mean[moved])).all()
    assert (np.abs(stronger.mean[moved]) < np.abs(model.mean[moved])).all()
    assert (np.sign(weaker.mean[moved]) == np.sign(model.mean[moved])).all()
    assert (weaker.var > model.var).all()
    assert (stronger.var < model.var).all()


def test_a_variance_above_the_prior_is_read_as_no_evidence() -> None:
    """A stored model's float16 variance can come out a hair above the prior: no evidence,
    not a negative one."""
    model = UserModel(np.zeros(DIM, np.float32), np.full(DIM, PRIOR_VAR * 1.001, np.float32))
    got = with_prior(model, PRIOR_VAR, 2 * PRIOR_VAR)
    np.testing.assert_allclose(got.var, 2 * PRIOR_VAR, rtol=1e-6)
    assert np.isfinite(got.mean).all()
