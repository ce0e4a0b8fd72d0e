from __future__ import annotations

import math

import numpy as np
import pytest

from origin.bandit import (
    BanditConfig,
    Decision,
    Posteriors,
    beta_draws,
    beta_update,
    cold_priors,
    decay_factor,
    decayed,
    exploration_floor,
    gradient_step,
    reward_of,
    sample,
    sigmoid,
)

CONFIG = BanditConfig()
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


def decision(exploration: list[bool], uncertainty: list[float] | None = None) -> Decision:
    n = len(exploration)
    return Decision(
        sampled=np.zeros(n),
        final=np.zeros(n),
        exploration=np.array(exploration, bool),
        uncertainty=np.array(uncertainty if uncertainty is not None else [0.5] * n),
    )


@pytest.mark.parametrize(
    ("action", "override", "expected"),
    [
        ("view", None, 0.1),
        ("click", None, 0.3),
        ("add_to_cart", None, 0.5),
        ("purchase", None, 1.0),
        ("dismiss", None, 0.0),  # a failure, never a negative alpha
        ("unknown", None, 0.0),
        ("click", 0.7, 0.7),
        ("click", 2.5, 1.0),
        ("purchase", -1.0, 0.0),
        ("dismiss", 0.0, 0.0),
    ],
    ids=[
        "view",
        "click",
        "cart",
        "purchase",
        "dismiss-is-zero",
        "unknown-action",
        "override",
        "override-clipped-high",
        "override-clipped-low",
        "override-zero-kept",
    ],
)
def test_reward_of(action: str, override: float | None, expected: float) -> None:
    assert reward_of(action, override) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("z", "expected"),
    [(0.0, 0.5), (2.0, 1 / (1 + math.exp(-2.0))), (-3.0, 1 / (1 + math.exp(3.0))),
     (1e4, 1.0), (-1e4, 0.0), (-745.0, 0.0), (800.0, 1.0)],
    ids=["zero", "positive", "negative", "huge", "huge-negative", "exp-underflow", "exp-overflow"],
)  # fmt: skip
def test_sigmoid_is_stable(z: float, expected: float) -> None:
    # filterwarnings=error turns an overflow in exp into a failure
    out = sigmoid(np.array([z]))
    assert np.isfinite(out).all()
    assert out[0] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("age_s", "half_life_s", "expected"),
    [
        (0.0, WEEK_S, 1.0),
        (WEEK_S, WEEK_S, 0.5),
        (2 * WEEK_S, WEEK_S, 0.25),
        (-WEEK_S, WEEK_S, 1.0),  # a clock ahead of the store never grows evidence
        (10 * WEEK_S, 0.0, 1.0),
        (10 * WEEK_S, -1.0, 1.0),
    ],
    ids=["fresh", "one-half-life", "two-half-lives", "negative-age", "disabled", "negative-off"],
)
def test_decay_factor(age_s: float, half_life_s: float, expected: float) -> None:
    assert float(decay_factor(age_s, half_life_s)) == pytest.approx(expected)
    vector = decay_factor(np.array([age_s, age_s]), half_life_s)
    assert np.allclose(vector, expected)


@pytest.mark.parametrize(
    ("half_life_s", "age_ms", "expected_alpha", "expected_beta"),
    [
        (WEEK_S, 0.0, 11.0, 5.0),
        (WEEK_S, WEEK_MS, 6.0, 3.0),  # evidence halves: 1 + (11 - 1) / 2
        (WEEK_S, 2 * WEEK_MS, 3.5, 2.0),
        (0.0, 52 * WEEK_MS, 11.0, 5.0),
    ],
    ids=["no-age", "one-half-life", "two-half-lives", "disabled"],
)
def test_decayed_shrinks_toward_the_prior(
    half_life_s: float, age_ms: float, expected_alpha: float, expected_beta: float
) -> None:
    config = BanditConfig(decay_half_life_s=half_life_s)
    now = 1e12
    before = posteriors([11.0, 11.0], [5.0, 5.0], [True, False], [now - age_ms, now - age_ms])
    after = decayed(before, now, config)
    assert after.alpha[0] == pytest.approx(expected_alpha)
    assert after.beta[0] == pytest.approx(expected_beta)
    # an unobserved candidate holds whatever it holds, untouched
    assert (after.alpha[1], after.beta[1]) == (11.0, 5.0)
    assert np.array_equal(after.observed, before.observed)


def mean(p: Posteriors, i: int) -> float:
    return float(p.alpha[i] / (p.alpha[i] + p.beta[i]))


@pytest.mark.parametrize(
    ("alpha", "beta", "observed", "category", "expected_means"),
    [
        # cold item 2 inherits its category's mean (0.8), with 2 pseudo-observations
        ([9.0, 1.0, 1.0], [3.0, 9.0, 1.0], [True, True, False], [0, 1, 0], [0.75, 0.1, 0.75]),
        # category 1 has nothing observed: the evidence-weighted overall mean
        (
            [9.0, 1.0, 1.0],
            [1.0, 9.0, 1.0],
            [True, True, False],
            [0, 0, 1],
            [0.9, 0.1, 0.5],
        ),
        # evidence-weighted: 8 observations at 0.9 outweigh 2 at 0.5 within a category
        (
            [9.0, 2.0, 1.0],
            [1.0, 2.0, 1.0],
            [True, True, False],
            [0, 0, 0],
            [0.9, 0.5, (8 * 0.9 + 2 * 0.5) / 10],
        ),
    ],
    ids=["category-mean", "fallback-overall-mean", "evidence-weighted"],
)
def test_cold_priors_inherit(
    alpha: list[float],
    beta: list[float],
    observed: list[bool],
    category: list[int],
    expected_means: list[float],
) -> None:
    before = posteriors(alpha, beta, observed)
    after = cold_priors(before, np.array(category), CONFIG)
    for i, was_observed in enumerate(observed):
        if was_observed:
            assert (after.alpha[i], after.beta[i]) == (alpha[i], beta[i])
        else:
            inherited = expected_means[i]
            strength = CONFIG.cold_prior_strength
            assert after.alpha[i] == pytest.approx(CONFIG.prior_alpha + strength * inherited)
            assert after.beta[i] == pytest.approx(CONFIG.prior_beta + strength * (1 - inherited))
    assert np.array_equal(after.observed, before.observed)


@pytest.mark.parametrize(
    "observed",
    [[False, False, False], [True, True, True]],
    ids=["nothing-observed-keeps-prior", "all-observed-untouched"],
)
def test_cold_priors_no_op(observed: list[bool]) -> None:
    before = posteriors([1.0, 4.0, 2.0], [1.0, 2.0, 7.0], observed)
    after = cold_priors(before, np.array([0, 1, 0]), CONFIG)
    assert np.array_equal(after.alpha, before.alpha)
    assert np.array_equal(after.beta, before.beta)


@pytest.mark.parametrize(
    ("content", "observed", "expected_means"),
    [
        ([0.8, 0.3, 0.5], [False, False, False], [0.8, 0.3, 0.5]),
        ([1.0, 0.0, 0.5], [False, False, False], [0.99, 0.01, 0.5]),
        # once anything is observed, similar items win over the content score
        ([0.8, 0.3, 0.5], [True, False, False], [None, 0.7, 0.7]),
    ],
    ids=["follows-relevance", "clipped-inside-the-interval", "same-category-takes-over"],
)
def test_a_cold_start_takes_its_prior_from_the_content_score(
    content: list[float], observed: list[bool], expected_means: list[float | None]
) -> None:
    before = posteriors([7.0, 1.0, 1.0], [3.0, 1.0, 1.0], observed)
    after = cold_priors(before, np.array([0, 0, 0]), CONFIG, content=np.array(content))
    # a cold item of a category with nothing observed keeps its content prior
    other = cold_priors(before, np.array([0, 1, 1]), CONFIG, content=np.array(content))
    if observed[0]:
        mean = float(np.clip(content[1], 0.01, 0.99))
        assert other.alpha[1] == pytest.approx(
            CONFIG.prior_alpha + CONFIG.cold_prior_strength * mean
        )
    strength = CONFIG.cold_prior_strength
    for i, mean in enumerate(expected_means):
        if mean is None:
            assert (after.alpha[i], after.beta[i]) == (before.alpha[i], before.beta[i])
            continue
        assert after.alpha[i] == pytest.approx(CONFIG.prior_alpha + strength * mean)
        assert after.beta[i] == pytest.approx(CONFIG.prior_beta + strength * (1 - mean))


def run_sample(
    seed: int,
    p: Posteriors,
    logits: list[float],
    base: list[float],
    eps: float,
    *,
    config: BanditConfig = CONFIG,
) -> Decision:
    return sample(
        np.random.default_rng(seed),
        p,
        np.array(logits, np.float64),
        np.array(base, np.float64),
        exploration_weight=eps,
        config=config,
    )


@pytest.mark.parametrize(
    ("alpha", "beta"),
    [(1.0, 1.0), (2.0, 8.0), (30.0, 3.0), (1.0, 200.0), (0.5, 0.5)],
    ids=["uniform", "low-mean", "high-mean", "very-low", "u-shaped"],
)
def test_beta_draws_follow_the_beta_distribution(alpha: float, beta: float) -> None:
    n = 20_000
    a, b = np.full(n, alpha), np.full(n, beta)
    draws = beta_draws(np.random.default_rng(0), a, b)
    assert np.array_equal(draws, beta_draws(np.random.default_rng(0), a, b))
    assert ((draws >= 0) & (draws <= 1)).all()
    mean = alpha / (alpha + beta)
    var = alpha * beta / ((alpha + beta) ** 2 * (alpha + beta + 1))
    # five standard errors: a seeded, deterministic check of the first two moments
    assert abs(draws.mean() - mean) < 5 * np.sqrt(var / n)
    assert draws.var() == pytest.approx(var, rel=0.1)


def test_sample_is_deterministic_for_a_seeded_generator() -> None:
    p = posteriors([2.0, 5.0, 1.0, 30.0], [3.0, 1.0, 1.0, 2.0], [True] * 4)
    a = run_sample(7, p, [0.1, -2.0, 0.0, 3.0], [0.2, 0.9, 0.5, 0.4], 0.3)
    b = run_sample(7, p, [0.1, -2.0, 0.0, 3.0], [0.2, 0.9, 0.5, 0.4], 0.3)
    for field in ("sampled", "final", "exploration", "uncertainty"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
    c = run_sample(8, p, [0.1, -2.0, 0.0, 3.0], [0.2, 0.9, 0.5, 0.4], 0.3)
    assert not np.array_equal(a.sampled, c.sampled)


@pytest.mark.parametrize(
    ("alpha", "beta", "logit", "lam", "base", "eps"),
    [
        (2.0, 3.0, 0.0, 0.2, 0.4, 0.3),  # no context signal: theta itself
        (2.0, 3.0, 4.0, 0.2, 0.4, 0.3),  # + lambda * (sigmoid - 0.5)
        (2.0, 3.0, -4.0, 0.2, 0.4, 0.3),
        (2.0, 3.0, 50.0, 0.5, 0.1, 0.3),  # strong lambda
        (1e6, 1e-3, 50.0, 0.2, 0.5, 0.3),  # theta ~ 1, + 0.1: clipped to 1
        (1e-3, 1e6, -50.0, 0.2, 0.5, 0.3),  # theta ~ 0, - 0.1: clipped to 0
        (2.0, 3.0, 1.0, 0.2, 0.6, 0.0),  # eps 0: final is the base score
        (2.0, 3.0, 1.0, 0.2, 0.6, 1.0),  # eps 1: final is the sample
    ],
    ids=[
        "no-context",
        "context-up",
        "context-down",
        "lambda-0.5",
        "clip-high",
        "clip-low",
        "eps-zero",
        "eps-one",
    ],
)
def test_sample_follows_algorithm_2(
    *, alpha: float, beta: float, logit: float, lam: float, base: float, eps: float
) -> None:
    config = BanditConfig(context_weight=lam)
    p = posteriors([alpha] * 3, [beta] * 3, [True] * 3)
    out = run_sample(11, p, [logit] * 3, [base] * 3, eps, config=config)
    theta = beta_draws(np.random.default_rng(11), p.alpha, p.beta)
    expected = np.clip(theta + lam * (1 / (1 + np.exp(-logit)) - 0.5), 0.0, 1.0)
    assert np.allclose(out.sampled, expected)
    assert ((out.sampled >= 0) & (out.sampled <= 1)).all()
    assert np.allclose(out.final, (1 - eps) * base + eps * out.sampled)
    assert np.array_equal(out.exploration, out.sampled > base)
    assert np.allclose(out.uncertainty, 1 / np.sqrt(alpha + beta))
    if eps == 0:
        assert np.array_equal(out.final, np.full(3, base))


def test_sample_clips_at_the_bounds() -> None:
    p = posteriors([1e6, 1e-3], [1e-3, 1e6], [True, True])
    out = run_sample(1, p, [50.0, -50.0], [0.5, 0.5], 0.3)
    assert out.sampled.tolist() == [1.0, 0.0]


def test_exploration_flag_is_sampled_above_base() -> None:
    # one draw per candidate from a wide posterior against a spread of base scores
    n = 200
    p = posteriors([1.0] * n, [1.0] * n, [False] * n)
    base = np.linspace(0, 1, n)
    out = run_sample(3, p, [0.0] * n, list(base), 0.3)
    assert np.array_equal(out.exploration, out.sampled > base)
    assert 0 < out.exploration.sum() < n


@pytest.mark.parametrize(
    ("alpha", "beta", "reward", "age_s", "half_life_s", "expected"),
    [
        (1.0, 1.0, 1.0, 0.0, WEEK_S, (2.0, 1.0)),  # purchase
        (1.0, 1.0, 0.3, 0.0, WEEK_S, (1.3, 1.7)),  # click
        (1.0, 1.0, 0.0, 0.0, WEEK_S, (1.0, 2.0)),  # dismiss: a failure
        (5.0, 3.0, 0.1, 0.0, WEEK_S, (5.1, 3.9)),
        (5.0, 3.0, -0.2, 0.0, WEEK_S, (5.0, 4.0)),  # raw dismiss weight clipped to 0
        (5.0, 3.0, 1.5, 0.0, WEEK_S, (6.0, 3.0)),
        (11.0, 5.0, 1.0, WEEK_S, WEEK_S, (7.0, 3.0)),  # decay to (6, 3) first
        (11.0, 5.0, 1.0, WEEK_S, 0.0, (12.0, 5.0)),  # decay disabled
    ],
    ids=[
        "purchase",
        "click",
        "failure",
        "view",
        "negative-clipped",
        "above-one-clipped",
        "decay-then-update",
        "decay-disabled",
    ],
)
def test_beta_update(
    *,
    alpha: float,
    beta: float,
    reward: float,
    age_s: float,
    half_life_s: float,
    expected: tuple[float, float],
) -> None:
    config = BanditConfig(decay_half_life_s=half_life_s)
    new_alpha, new_beta = beta_update(alpha, beta, reward, age_s=age_s, config=config)
    assert new_alpha == pytest.approx(expected[0])
    assert new_beta == pytest.approx(expected[1])


@pytest.mark.parametrize(
    ("weights", "features", "reward", "eta"),
    [
        ([0.0, 0.0, 0.0], [1.0, 0.5, 0.0], 1.0, 0.01),
        ([0.0, 0.0, 0.0], [1.0, 0.5, 0.0], 0.0, 0.01),
        ([0.5, -1.0, 2.0], [1.0, 1.0, 1.0], 0.3, 0.01),
        ([3.0, 3.0, 3.0], [1.0, 1.0, 1.0], 1.0, 0.1),  # confident and right: tiny step
        ([0.2, 0.1, -0.3], [0.0, 0.0, 0.0], 1.0, 0.5),  # no features: no change
    ],
    ids=["zero-weights-reward", "zero-weights-failure", "mixed", "saturated", "zero-x"],
)
def test_gradient_step(
    weights: list[float], features: list[float], reward: float, eta: float
) -> None:
    w = np.array(weights, np.float32)
    x = np.array(features, np.float32)
    expected = w + eta * (reward - 1 / (1 + np.exp(-float(w @ x)))) * x
    out = gradient_step(w, x, reward, eta)
    assert out.dtype == np.float32
    assert np.allclose(out, expected, atol=1e-7)
    assert np.array_equal(w, np.array(weights, np.float32))  # input untouched


def test_gradient_step_moves_the_prediction_toward_the_reward() -> None:
    w = np.zeros(4, np.float32)
    x = np.ones(4, np.float32)
    up = gradient_step(w, x, 1.0, 0.01)
    down = gradient_step(w, x, 0.0, 0.01)
    assert float(up @ x) > 0 > float(down @ x)


@pytest.mark.parametrize(
    ("exploration", "uncertainty", "count", "min_share", "expected_order", "expected_forced"),
    [
        # no explorer shown: the last non-exploring slot gives way to the first explorer below
        (
            [False] * 6 + [True, False],
            None,
            5,
            0.05,
            [0, 1, 2, 3, 6, 4, 5, 7],
            [6],
        ),
        # enough explorers already: untouched
        ([False, True, False, False, False, True], None, 5, 0.05, [0, 1, 2, 3, 4, 5], []),
        # ceil(0.5 * 4) = 2 wanted, one shown: one more, behind the shown explorer
        (
            [False, False, True, False, False, True],
            None,
            4,
            0.5,
            [0, 1, 2, 5, 3, 4],
            [5],
        ),
        # no explorer below: the most uncertain candidate below is forced in
        (
            [False] * 6,
            [0.1, 0.1, 0.1, 0.2, 0.9, 0.3],
            3,
            0.05,
            [0, 1, 4, 2, 3, 5],
            [4],
        ),
        # explorers below are preferred over a more uncertain non-explorer
        (
            [False] * 4 + [False, True],
            [0.1, 0.1, 0.1, 0.1, 0.99, 0.01],
            3,
            0.05,
            [0, 1, 5, 2, 3, 4],
            [5],
        ),
        # min_share 0: no floor
        ([False] * 6, None, 3, 0.0, [0, 1, 2, 3, 4, 5], []),
        # nothing below the shown window: nothing to force in
        ([False] * 3, None, 5, 0.05, [0, 1, 2], []),
    ],
    ids=[
        "first-explorer-below",
        "enough-already",
        "ceil-of-share",
        "most-uncertain-fallback",
        "explorer-preferred-over-uncertain",
        "zero-share",
        "empty-tail",
    ],
)
def test_exploration_floor(
    *,
    exploration: list[bool],
    uncertainty: list[float] | None,
    count: int,
    min_share: float,
    expected_order: list[int],
    expected_forced: list[int],
) -> None:
    order = np.arange(len(exploration), dtype=np.intp)
    new_order, forced = exploration_floor(
        order, decision(exploration, uncertainty), count, min_share
    )
    assert new_order.tolist() == expected_order
    assert forced.tolist() == expected_forced


@pytest.mark.parametrize(
    ("n", "count", "min_share", "explorers_below"),
    [
        (100, 20, 0.05, [50]),
        (100, 40, 0.05, [60, 70, 80]),
        (100, 40, 0.05, []),
        (100, 60, 0.05, [99]),
        (41, 40, 0.05, []),  # one candidate below, two explorers wanted
        (22, 20, 0.2, [21]),  # two below, four wanted
    ],
    ids=["count-20", "count-40", "count-40-fallback", "count-60-mixed", "short-tail", "tail-of-2"],
)
def test_exploration_floor_guarantees_the_minimum(
    n: int, count: int, min_share: float, explorers_below: list[int]
) -> None:
    flags = [False] * n
    for c in explorers_below:
        flags[c] = True
    rng = np.random.default_rng(0)
    d = decision(flags, list(rng.random(n)))
    order = rng.permutation(n).astype(np.intp)
    new_order, forced = exploration_floor(order, d, count, min_share)
    assert sorted(new_order.tolist()) == list(range(n))  # a permutation: nothing duplicated
    head = new_order[:count]
    explorers = int(np.count_nonzero(d.exploration[head])) + len(
        set(forced.tolist()) - set(np.flatnonzero(d.exploration).tolist())
    )
    wanted = math.ceil(min_share * count)
    assert explorers >= min(wanted, n - count)
    assert set(forced.tolist()) <= set(head.tolist())
