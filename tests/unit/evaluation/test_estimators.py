"""The estimators on synthetic logs whose true values are known exactly: a position-based
click model (examination by position times attraction by item), Plackett-Luce logging and
candidate policies over 6 items and 3 positions, their marginals by enumerating every
slate."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pytest

from evaluation.estimators import (
    MIN_PROPENSITY,
    SlateLog,
    dr,
    effective_sample_size,
    estimate,
    ips,
    snips,
    warnings_of,
)

Array = npt.NDArray[np.float64]
ITEMS, POSITIONS = 6, 3
EXAMINE = np.array([1.0, 0.6, 0.35])
ATTRACT = np.array([0.30, 0.22, 0.15, 0.10, 0.06, 0.03])


@dataclass(frozen=True)
class Policy:
    slates: list[tuple[int, ...]]
    probabilities: Array  # of each slate
    marginals: Array  # (items, positions)


def plackett_luce(scores: Array) -> Policy:
    weights = np.exp(scores)
    slates = list(itertools.permutations(range(ITEMS), POSITIONS))
    probabilities = np.empty(len(slates))
    for s, slate in enumerate(slates):
        left, p = weights.sum(), 1.0
        for item in slate:
            p *= weights[item] / left
            left -= weights[item]
        probabilities[s] = p
    marginals = np.zeros((ITEMS, POSITIONS))
    for slate, p in zip(slates, probabilities, strict=True):
        for k, item in enumerate(slate):
            marginals[item, k] += p
    return Policy(slates, probabilities, marginals)


def true_value(policy: Policy) -> float:
    return float(np.sum(policy.marginals * ATTRACT[:, None] * EXAMINE[None, :]))


LOGGING = plackett_luce(np.array([0.0, 0.3, 0.1, 0.5, 0.2, 0.4]))
CANDIDATES = {
    "close": plackett_luce(np.array([0.4, 0.3, 0.2, 0.3, 0.0, 0.1])),
    "greedy": plackett_luce(np.array([1.5, 1.0, 0.6, 0.0, -0.3, -0.6])),
    "uniform": plackett_luce(np.zeros(ITEMS)),
}


def logged(candidate: Policy, n: int, rng: np.random.Generator, model_bias: float) -> SlateLog:
    """``n`` slates of ``LOGGING`` with their clicks, read for ``candidate``; the reward
    model is the truth plus ``model_bias`` (DR is unbiased whatever it is)."""
    chosen = rng.choice(len(LOGGING.slates), size=n, p=LOGGING.probabilities)
    items = np.array([LOGGING.slates[c] for c in chosen])  # (n, K)
    positions = np.arange(POSITIONS)[None, :]
    truth = ATTRACT[items] * EXAMINE[None, :]
    model = np.clip(ATTRACT + model_bias, 0, 1)
    expected_by_model = (candidate.marginals * model[:, None]).sum(axis=0) * EXAMINE
    return SlateLog(
        logged=LOGGING.marginals[items, positions],
        target=candidate.marginals[items, positions],
        reward=(rng.random(items.shape) < truth).astype(np.float64),
        shown=np.ones(items.shape, bool),
        predicted=model[items] * EXAMINE[None, :],
        predicted_target=np.broadcast_to(expected_by_model, items.shape).copy(),
    )


@pytest.mark.parametrize("name", list(CANDIDATES))
@pytest.mark.parametrize("run", [ips, snips, dr])
def test_each_estimator_finds_the_known_value(name: str, run: object) -> None:
    candidate = CANDIDATES[name]
    log = logged(candidate, 40_000, np.random.default_rng(5), model_bias=0.05)
    assert callable(run)
    assert run(log) == pytest.approx(true_value(candidate), rel=0.05)


def test_the_logging_policy_estimates_itself_as_its_own_mean() -> None:
    log = logged(LOGGING, 2_000, np.random.default_rng(1), model_bias=0.0)
    assert ips(log) == pytest.approx(log.reward.sum() / len(log))
    assert effective_sample_size(log) == pytest.approx(len(log))


def test_dr_with_a_perfect_model_has_the_smallest_interval() -> None:
    candidate = CANDIDATES["greedy"]
    log = logged(candidate, 5_000, np.random.default_rng(2), model_bias=0.0)
    widths = {
        name: (e.high - e.low)
        for name in ("ips", "dr")
        for e in [estimate(log, name, np.random.default_rng(3), samples=300)]
    }
    assert widths["dr"] < widths["ips"]


@pytest.mark.parametrize("estimator", ["ips", "snips", "dr"])
def test_intervals_cover_the_truth_at_about_their_level(estimator: str) -> None:
    """95% intervals over 40 independent logs of 3,000 slates: at least 34 cover the truth
    (a binomial(40, 0.95) falls below 34 with probability under 1%)."""
    candidate = CANDIDATES["close"]
    truth = true_value(candidate)
    covered = 0
    for seed in range(40):
        rng = np.random.default_rng(100 + seed)
        log = logged(candidate, 3_000, rng, model_bias=0.04)
        e = estimate(log, estimator, rng, samples=200)
        covered += e.low <= truth <= e.high
    assert covered >= 34


def test_far_candidates_and_tiny_propensities_are_warned_of() -> None:
    rng = np.random.default_rng(4)
    near = logged(CANDIDATES["close"], 5_000, rng, model_bias=0.0)
    assert warnings_of(near) == ()
    small = logged(CANDIDATES["close"], 50, rng, model_bias=0.0)
    tiny = SlateLog(
        logged=np.full_like(small.logged, MIN_PROPENSITY / 2),
        target=small.target,
        reward=small.reward,
        shown=small.shown,
    )
    said = " ".join(warnings_of(tiny))
    assert "logged propensity under" in said
    assert "effective sample size" in said


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"target": np.zeros((2, 2))}, "every array"),
        ({"logged": np.array([[0.5, 0.0, 0.5], [0.5, 0.5, 0.5]])}, "positive"),
        ({"predicted": np.zeros((2, 2)), "predicted_target": np.zeros((2, 2))}, "every array"),
        ({"predicted": np.zeros((2, 3)), "predicted_target": np.zeros((2, 3))}, None),
        ({"predicted_target": np.zeros((2, 3))}, "go together"),
    ],
)
def test_a_malformed_log_is_refused(change: dict[str, Array], message: str | None) -> None:
    parts: dict[str, Array] = {
        "logged": np.full((2, 3), 0.5),
        "target": np.full((2, 3), 0.5),
        "reward": np.zeros((2, 3)),
    }
    parts.update(change)
    build = lambda: SlateLog(shown=np.ones((2, 3), bool), **parts)  # noqa: E731
    if message is None:
        assert len(build()) == 2
    else:
        with pytest.raises(ValueError, match=message):
            build()


def test_shorter_slates_count_only_their_shown_positions() -> None:
    log = SlateLog(
        logged=np.array([[0.5, 0.5], [0.5, 1.0]]),
        target=np.array([[1.0, 1.0], [1.0, 0.5]]),
        reward=np.array([[1.0, 1.0], [0.0, 1.0]]),
        shown=np.array([[True, True], [True, False]]),
    )
    assert ips(log) == pytest.approx((2 * 1 + 2 * 1 + 2 * 0) / 2)
    assert snips(log) == pytest.approx(0.5 + 1.0)


def test_unknown_estimator_and_empty_log() -> None:
    log = logged(LOGGING, 10, np.random.default_rng(0), model_bias=0.0)
    with pytest.raises(ValueError, match="unknown estimator"):
        estimate(log, "magic", np.random.default_rng(0))
    with pytest.raises(ValueError, match="needs a reward model"):
        dr(SlateLog(log.logged, log.target, log.reward, log.shown))
