"""Offline evaluation end to end on a synthetic log whose truth is known
(``evaluation.offline.evaluate``).

The world: decisions over 8 candidates each (random unit vectors, Beta posteriors, a
user's model), logged by our ranker at exploration weight 0.3 (``relevance.slate.runs``,
as the origin ranks: the first run served, its propensities from 64 runs), clicked by a
position-based model whose attraction is the items' own probit score, Φ(b + θ · x). A
candidate's true value on those contexts is exact: Σ_k e_k Σ_a π_k(a | x) A(a), its
marginals π from 512 runs of its ranker (or exactly, for the references).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pytest

from evaluation.offline import Evaluation, Logged, Propensities, evaluate
from protocol.contexts import RankedContext
from protocol.decisions import Decision, Shown
from protocol.policies import Policy, PolicyConfig
from protocol.rewards import Rewarded
from relevance.item_posteriors import probit_means
from relevance.normal import cdf
from relevance.slate import Candidates, runs, spread_for
from relevance.user_model import UserModel, model_from_bytes
from tests.unit.evaluation.contexts import DIM, logged_context, user_model

Array = npt.NDArray[np.float64]
EXAMINE = np.array([1.0, 0.6, 0.35])
COUNT = EXAMINE.shape[0]
ITEMS = 8
LIVE = Policy("configured", "1", PolicyConfig(exploration_weight=0.3))
CANDIDATES = (
    Policy("same", "1", PolicyConfig(exploration_weight=0.3)),
    Policy("greedier", "1", PolicyConfig(exploration_weight=0.1)),
    Policy("popular", "ref", PolicyConfig(kind="popular")),
    Policy("random", "ref", PolicyConfig(kind="random")),
)
SAMPLES = 100
DECISIONS = 150
SEEDS = range(10)
# Of the 10 seeds, how many 95% intervals must cover the truth: a binomial(10, 0.95)
# falls below 8 with probability about 1%.
COVERED = 8
DRAWS = 255  # the replays' (``replay.DRAWS``)


@dataclass(frozen=True)
class World:
    records: list[Logged]
    attraction: list[Array]  # per decision, each kept candidate's true attraction

    def truth(self, config: PolicyConfig, rng: np.random.Generator) -> float:
        """The expected clicks per slate of ``config`` on these contexts."""
        total = 0.0
        for r, a in zip(self.records, self.attraction, strict=True):
            total += float(EXAMINE @ marginal_rewards(r, a, config, rng))
        return total / len(self.records)


def candidates_of(context: RankedContext, vectors: np.ndarray) -> Candidates:
    return Candidates(
        vectors,
        context.alpha.astype(np.float64),
        context.beta.astype(np.float64),
        context.shift.astype(np.float64),
    )


def user_of(context: RankedContext) -> UserModel | None:
    return None if context.user is None else model_from_bytes(context.user, DIM)


def marginal_rewards(
    r: Logged, attraction: Array, config: PolicyConfig, rng: np.random.Generator
) -> Array:
    """Σ_a π_k(a | x) A(a) for each position k."""
    c = r.context
    if config.kind == "random":
        return np.full(COUNT, attraction.mean())
    if config.kind == "popular":
        best = np.argsort(-(c.alpha / (c.alpha + c.beta)), kind="stable")[:COUNT]
        return attraction[best]
    spread = spread_for(config.exploration_weight)
    ran = runs(candidates_of(c, r.vectors), user_of(c), COUNT, rng, spread=spread, draws=511)
    out: Array = attraction[ran.rows].mean(axis=0)
    return out


def world(seed: int, n: int) -> World:
    """``n`` decisions logged by ``LIVE``, with clicks drawn from the click model."""
    rng = np.random.default_rng(seed)
    records, attractions = [], []
    spread = spread_for(LIVE.config.exploration_weight)
    for i in range(n):
        user = user_model(rng, DIM, certainty=0.3)
        context, vectors = logged_context(
            rng, ITEMS, COUNT, user=user, request_id=f"r-{i}", rate=(3.0, 6.0), seen=(4.0, 40.0)
        )
        attraction = cdf(
            probit_means(context.alpha.astype(np.float64), context.beta.astype(np.float64))
            + vectors.astype(np.float64) @ user.mean.astype(np.float64)
        )
        slate = runs(candidates_of(context, vectors), user, COUNT, rng, spread=spread).slate(0)
        clicked = rng.random(COUNT) < EXAMINE * attraction[slate.rows]
        shown = tuple(
            Shown(context.items[row], k + 1, float(score), float(p))
            for k, (row, score, p) in enumerate(
                zip(slate.rows, slate.scores, slate.propensities, strict=True)
            )
        )
        decision = Decision(
            f"r-{i}", "u-1", "user", "cell", "home", i, "origin", "configured", "1", "m", shown
        )
        engaged = {s.item_id: 0.25 for s, c in zip(shown, clicked, strict=True) if c}
        reward = Rewarded(f"r-{i}", "u-1", i + 1, engaged)
        records.append(Logged(decision, context, reward, vectors))
        attractions.append(attraction)
    return World(records, attractions)


def evaluated(w: World, seed: int, **options: object) -> Evaluation:
    return evaluate(
        w.records,
        LIVE,
        CANDIDATES,
        np.random.default_rng(seed),
        samples=SAMPLES,
        draws=DRAWS,
        **options,  # type: ignore[arg-type]
    )


@dataclass(frozen=True)
class Trial:
    evaluation: Evaluation
    truth: dict[str, float]  # by policy name, "live" included


@pytest.fixture(scope="module")
def trials() -> list[Trial]:
    """The same evaluation on 10 independently drawn logs (about a second each)."""
    out = []
    for seed in SEEDS:
        w = world(seed, DECISIONS)
        rng = np.random.default_rng(1_000 + seed)
        truth = {"live": w.truth(LIVE.config, rng)}
        for c in CANDIDATES:
            same = c.config == LIVE.config
            truth[c.name] = truth["live"] if same else w.truth(c.config, rng)
        out.append(Trial(evaluated(w, seed), truth))
    return out


@pytest.mark.parametrize("estimator", ["ips", "snips", "dr"])
@pytest.mark.parametrize("candidate", [c.name for c in CANDIDATES])
def test_the_intervals_cover_each_candidates_true_value(
    trials: list[Trial], candidate: str, estimator: str
) -> None:
    covered = 0
    for t in trials:
        [c] = [c for c in t.evaluation.candidates if c.policy.name == candidate]
        e = c.by(estimator)
        assert e.low <= e.value <= e.high
        covered += e.low <= t.truth[candidate] <= e.high
    assert covered >= COVERED


def test_the_on_policy_estimate_is_the_live_policys_clicks_and_covers_its_truth(
    trials: list[Trial],
) -> None:
    covered = 0
    for t in trials:
        on = t.evaluation.on_policy
        assert on.estimator == "on-policy"
        assert t.evaluation.live == LIVE
        assert (t.evaluation.decisions, t.evaluation.positions) == (DECISIONS, COUNT)
        covered += on.low <= t.truth["live"] <= on.high
    assert covered >= COVERED


def test_the_estimates_tell_a_better_candidate_from_a_worse_one(trials: list[Trial]) -> None:
    """Greedier is worth more than random in truth (by a third); DR says so on every log."""
    for t in trials:
        assert t.truth["greedier"] > 1.2 * t.truth["random"]
        by = {c.policy.name: c.by("dr").value for c in t.evaluation.candidates}
        assert by["greedier"] > by["random"]


def test_the_on_policy_value_is_the_mean_of_the_logged_clicks() -> None:
    w = world(42, 60)
    clicks = [len(r.reward.engaged) for r in w.records]
    got = evaluated(w, 0).on_policy
    assert got.value == pytest.approx(sum(clicks) / len(clicks))
    assert got.ess == 60


def test_logged_propensities_are_read_as_logged() -> None:
    """With ``Propensities.LOGGED`` a weight is the candidate's propensity over the one the
    decision logged (a uniformly random candidate: 1 / retrieved over it)."""
    w = world(43, 60)
    logged = evaluate(
        w.records,
        LIVE,
        (Policy("random", "ref", PolicyConfig(kind="random")),),
        np.random.default_rng(0),
        samples=20,
        propensities=Propensities.LOGGED,
    )
    expected = sum(
        sum((s.item_id in r.reward.engaged) / ITEMS / s.propensity for s in r.decision.shown)
        for r in w.records
    ) / len(w.records)
    assert logged.candidates[0].by("ips").value == pytest.approx(expected)


def test_a_candidate_where_the_live_policy_never_goes_is_warned_of() -> None:
    """A deterministic live policy shows one slate per context: a uniformly random
    candidate's choices are mostly outside its support, and said to be."""
    w = world(44, 40)
    greedy = Policy("configured", "1", PolicyConfig(exploration_weight=0.0))
    result = evaluate(
        w.records,
        greedy,
        (Policy("random", "ref", PolicyConfig(kind="random")), greedy),
        np.random.default_rng(0),
        samples=20,
        draws=DRAWS,
    )
    uniform, itself = result.candidates
    assert uniform.support == pytest.approx(1 / ITEMS)
    assert any("where the live policy never goes" in x for x in uniform.warnings)
    assert itself.support == 1.0
    assert not any("never goes" in x for x in itself.warnings)


def test_an_empty_window_estimates_nothing() -> None:
    with pytest.raises(ValueError, match="no logged decision"):
        evaluate([], LIVE, CANDIDATES, np.random.default_rng(0))
