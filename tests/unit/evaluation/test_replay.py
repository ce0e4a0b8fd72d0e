"""A policy replayed on a logged context (``evaluation.replay``): the logging
configuration reproduces the logged propensities, the references are exact, and what the
context did not keep or the candidate switches on is read as the candidate would."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.replay import MISSING, replay, rows_of
from protocol.contexts import RankedContext
from protocol.policies import PolicyConfig
from relevance.slate import Candidates, mean_scores, runs, spread_for
from relevance.user_model import PRIOR_SCALE, UserModel, model_from_bytes, with_prior
from tests.unit.evaluation.contexts import DIM, PRIOR_VAR, logged_context, user_model

RUNS = 256  # a replay's runs (``replay.DRAWS`` + 1)


def candidates_of(context: RankedContext, vectors: np.ndarray, emotion: bool) -> Candidates:
    shift = context.shift.astype(np.float64)
    if emotion:
        shift = shift + context.emotion.astype(np.float64)
    return Candidates(
        vectors, context.alpha.astype(np.float64), context.beta.astype(np.float64), shift
    )


def greedy(context: RankedContext, vectors: np.ndarray, user: UserModel | None) -> list[int]:
    """The rows a policy without exploration shows: the best ``count`` by mean score."""
    mean, _ = mean_scores(candidates_of(context, vectors, emotion=False), user)
    return [int(r) for r in np.argsort(-mean, kind="stable")[: context.count]]


@pytest.mark.parametrize(
    ("personal", "rank"),
    [(True, 0), (False, 0), (True, 3)],
    ids=["user", "segment-wide", "user-with-factor"],
)
@pytest.mark.parametrize("exploration", [0.1, 0.3])
def test_the_logging_configuration_reproduces_the_logged_propensities(
    personal: bool, rank: int, exploration: float
) -> None:
    """The live ranker logs a slate with propensities from its 64 runs; replayed on the
    record with the same knobs, 256 runs agree with the policy's exact propensities (here:
    the shares of 20,000 runs) within 4.5 standard errors of a 256-run share, and with the
    logged ones within those of a 64-run share."""
    rng = np.random.default_rng(7 if personal else 8)
    user = user_model(rng, rank=rank) if personal else None
    context, vectors = logged_context(rng, 60, 6, user=user)
    live = candidates_of(context, vectors, emotion=False)
    spread = spread_for(exploration)
    served = runs(live, user, context.count, rng, spread=spread).slate(0)
    many = runs(live, user, context.count, rng, spread=spread, draws=19_999)
    exact = (many.rows == served.rows[None, :]).mean(axis=0)
    policy = PolicyConfig(exploration_weight=exploration, user_prior_scale=PRIOR_SCALE)
    got = replay(context, vectors, served.rows, policy, rng)
    assert got.slates is not None
    assert got.slates.shape == (RUNS, context.count)
    error = np.sqrt(exact * (1 - exact))
    assert (np.abs(got.propensity - exact) <= 4.5 * error / np.sqrt(RUNS) + 1 / RUNS).all()
    assert (np.abs(served.propensities - exact) <= 4.5 * error / np.sqrt(64) + 1 / 64).all()
    assert exact.min() < 0.9  # the policy explores: the propensities are not all certain


def test_a_shown_item_the_context_did_not_keep_is_never_chosen_by_the_ranker() -> None:
    rng = np.random.default_rng(1)
    context, vectors = logged_context(rng, 30, 3, user=user_model(rng), retrieved=500)
    shown = rows_of(context, ["it-4", "gone", "it-9"])
    assert shown.tolist() == [4, MISSING, 9]
    ranker = replay(context, vectors, shown, PolicyConfig(exploration_weight=0.3), rng)
    assert ranker.propensity[1] == 0.0
    assert ranker.slates is not None
    assert (ranker.slates >= 0).all()
    uniform = replay(context, vectors, shown, PolicyConfig(kind="random"), rng)
    assert uniform.propensity.tolist() == [1 / 500] * 3  # a random slate could pick it


@pytest.mark.parametrize(("kept", "retrieved"), [(30, 30), (30, 4_000), (5, 7)])
def test_random_puts_any_retrieved_candidate_anywhere_with_one_over_retrieved(
    kept: int, retrieved: int
) -> None:
    rng = np.random.default_rng(2)
    context, vectors = logged_context(rng, kept, 4, retrieved=retrieved)
    shown = np.array([0, 3, 1, 2], np.intp)
    got = replay(context, vectors, shown, PolicyConfig(kind="random"), rng)
    assert got.propensity.tolist() == [1 / retrieved] * 4
    assert got.slates is None


def test_popular_is_certain_where_the_popular_slate_matches_and_never_elsewhere() -> None:
    rng = np.random.default_rng(3)
    context, vectors = logged_context(rng, 12, 4, user=user_model(rng))
    by_rate = np.argsort(-(context.alpha / (context.alpha + context.beta)), kind="stable")
    popular = by_rate[:4].tolist()
    config = PolicyConfig(kind="popular")
    cases = {
        "the popular slate": (popular, [1.0, 1.0, 1.0, 1.0]),
        "two swapped": ([popular[1], popular[0], *popular[2:]], [0.0, 0.0, 1.0, 1.0]),
        "another item": ([popular[0], int(by_rate[-1]), *popular[2:]], [1.0, 0.0, 1.0, 1.0]),
        "shorter": (popular[:2], [1.0, 1.0]),
        "not kept": ([MISSING, *popular[1:]], [0.0, 1.0, 1.0, 1.0]),
    }
    for name, (shown, expected) in cases.items():
        got = replay(context, vectors, np.array(shown, np.intp), config, rng)
        assert got.propensity.tolist() == expected, name
        assert got.slates is not None
        assert got.slates.tolist() == [popular], name


def test_the_emotion_rules_add_their_shift_when_the_candidate_has_them_on() -> None:
    """An item the rules lift far above the rest is shown first with them, never without."""
    rng = np.random.default_rng(4)
    n = 20
    emotion = np.zeros(n)
    context, vectors = logged_context(rng, n, 3, user=user_model(rng))
    lifted = int(np.argmin(context.alpha / (context.alpha + context.beta)))
    emotion[lifted] = 3.0
    emotion[greedy(context, vectors, None)[0]] = -3.0
    context, vectors = logged_context(
        np.random.default_rng(4), n, 3, user=user_model(np.random.default_rng(4)), emotion=emotion
    )
    shown = np.array([lifted, 0, 1], np.intp)
    rules = PolicyConfig(exploration_weight=0.0, emotion_rules=True)
    on = replay(context, vectors, shown, rules, rng)
    off = replay(context, vectors, shown, PolicyConfig(exploration_weight=0.0), rng)
    assert on.slates is not None
    assert off.slates is not None
    assert on.slates[0, 0] == lifted
    assert on.propensity[0] == 1.0
    assert lifted not in off.slates[0].tolist()
    assert off.propensity[0] == 0.0
    # with the rules on, the replay ranks exactly as the ranker does on the shifted scores
    user = model_from_bytes(context.user or b"", DIM)
    expected = runs(candidates_of(context, vectors, emotion=True), user, 3, rng, spread=0.0)
    assert on.slates.tolist() == expected.rows.tolist()


@pytest.mark.parametrize("personal", [True, False], ids=["user", "segment-wide"])
def test_without_exploration_the_slate_is_deterministic_with_propensities_one_or_zero(
    personal: bool,
) -> None:
    rng = np.random.default_rng(5)
    user = user_model(rng) if personal else None
    context, vectors = logged_context(rng, 40, 5, user=user)
    best = greedy(context, vectors, user)
    other = int(np.setdiff1d(np.arange(40), best)[0])
    shown = np.array([best[0], best[1], other, best[2], best[4]], np.intp)
    got = replay(context, vectors, shown, PolicyConfig(exploration_weight=0.0), rng)
    assert got.slates is not None
    assert got.slates.tolist() == [best]
    assert got.propensity.tolist() == [1.0, 1.0, 0.0, 0.0, 1.0]


def test_a_candidates_prior_strength_reweighs_the_logged_user_model() -> None:
    """A much stronger prior makes the user's taste count less: the replay ranks with the
    model re-weighed by ``with_prior``, as the ranker would."""
    rng = np.random.default_rng(6)
    user = user_model(rng, certainty=0.9)
    context, vectors = logged_context(rng, 40, 5, user=user)
    scale = 0.05
    stronger = with_prior(user, PRIOR_VAR, scale / DIM)
    expected = greedy(context, vectors, stronger)
    shown = np.array(expected, np.intp)
    config = PolicyConfig(exploration_weight=0.0, user_prior_scale=scale)
    got = replay(context, vectors, shown, config, rng)
    assert got.slates is not None
    assert got.slates.tolist() == [expected]
    assert expected != greedy(context, vectors, user)  # the prior made a difference


@pytest.mark.parametrize(
    ("shown", "rows"),
    [
        ([], []),
        (["it-2", "it-0"], [2, 0]),
        (["x", "it-1", "y"], [MISSING, 1, MISSING]),
    ],
)
def test_rows_of(shown: list[str], rows: list[int]) -> None:
    context, _ = logged_context(np.random.default_rng(0), 3, 2)
    got = rows_of(context, shown)
    assert got.tolist() == rows
    assert got.dtype == np.intp
