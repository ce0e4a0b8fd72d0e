from __future__ import annotations

import numpy as np
import pytest

from benchmarks.click_model import Outcome
from benchmarks.learning_baselines import (
    BetaPrior,
    BetaThompson,
    EpsilonGreedy,
    Evidence,
    LinearThompson,
    LinearThompsonConfig,
    count_outcome,
    draw,
    explore_positions,
    posterior,
)
from benchmarks.learning_policies import BASELINES, CHOSEN, VW, build
from benchmarks.learning_run import drive
from benchmarks.shop_world import Catalog, Request, WorldConfig, make_world, requests

EXAMINE = np.array([1.0, 0.5, 0.25])


def catalog(visible: list[list[float]]) -> Catalog:
    n = len(visible)
    return Catalog(
        item_ids=tuple(f"it-{i}" for i in range(n)),
        category=np.zeros(n, np.intp),
        category_names=("Books",),
        visible=np.array(visible, np.float64),
        price=np.ones(n),
        popularity=np.full(n, 0.5),
        titles=tuple(f"item {i}" for i in range(n)),
    )


def request(user_id: str = "u1", count: int = 2, index: int = 0) -> Request:
    return Request(index=index, user=0, user_id=user_id, activity="power", device="mobile",
                   count=count)  # fmt: skip


def outcome(clicked: list[bool]) -> Outcome:
    flags = np.array(clicked, bool)
    none = np.zeros(len(clicked), bool)
    return Outcome(clicked=flags, carted=none, purchased=none, dismissed=none)


@pytest.mark.parametrize(
    ("rows", "clicked", "successes", "failures"),
    [
        # A click is one success wherever it is; a non-click is examine(position) of a failure.
        ([2, 0], [True, False], [0, 0, 1, 0], [0.5, 0, 0, 0]),
        ([0, 1, 3], [False, False, False], [0, 0, 0, 0], [1.0, 0.5, 0, 0.25]),
        ([3, 1, 0], [False, True, True], [1, 1, 0, 0], [0, 0, 0, 1.0]),
        ([1], [True], [0, 1, 0, 0], [0, 0, 0, 0]),
    ],
)
def test_counts_weigh_non_clicks_by_examination(
    rows: list[int], clicked: list[bool], successes: list[float], failures: list[float]
) -> None:
    s, f = np.zeros(4), np.zeros(4)
    count_outcome(s, f, np.array(rows, np.intp), np.array(clicked, bool), EXAMINE)
    assert s.tolist() == successes
    assert f == pytest.approx(failures)


async def test_beta_thompson_counts_its_outcomes() -> None:
    policy = BetaThompson(catalog([[1.0]] * 4), EXAMINE, np.random.default_rng(0), BetaPrior(1, 3))
    await policy.learn(request(), ["it-2", "it-0"], outcome([True, False]))
    await policy.learn(request(), ["it-0", "it-2"], outcome([False, False]))
    counts = policy.counts
    assert counts.alpha.tolist() == [1.0, 1.0, 2.0, 1.0]
    assert counts.beta == pytest.approx([3 + 0.5 + 1.0, 3.0, 3.5, 3.0])


async def test_beta_thompson_ranks_by_its_posteriors_once_they_are_sharp() -> None:
    policy = BetaThompson(catalog([[1.0]] * 4), EXAMINE, np.random.default_rng(0), BetaPrior())
    counts = policy.counts
    counts.successes[:] = [100, 5_000, 10, 2_000]
    counts.failures[:] = [9_900, 5_000, 9_990, 8_000]
    assert await policy.slate(request(count=3)) == ["it-1", "it-3", "it-0"]


@pytest.mark.parametrize("epsilon", [0.0, 0.3, 1.0])
def test_exploration_swaps_positions_for_unshown_items(epsilon: float) -> None:
    rng = np.random.default_rng(1)
    greedy = np.array([7, 3, 5], np.intp)
    swapped = 0
    for _ in range(2_000):
        slate = explore_positions(rng, greedy, 10, epsilon)
        assert len(set(slate.tolist())) == 3
        assert all(0 <= r < 10 for r in slate)
        swapped += int((slate != greedy).sum())
    # A swap can land on a greedy item another swap removed, so slightly below epsilon.
    assert swapped / 6_000 == pytest.approx(epsilon, abs=0.03)


async def test_epsilon_greedy_without_exploration_is_greedy_on_posterior_means() -> None:
    policy = EpsilonGreedy(
        catalog([[1.0]] * 4), EXAMINE, np.random.default_rng(0), BetaPrior(1, 1), epsilon=0.0
    )
    # it-1: 1 click in 1 shown (2/3); it-0: never shown (1/2); it-2: 0 of examine 1 (1/3).
    await policy.learn(request(), ["it-2", "it-1"], outcome([False, True]))
    assert await policy.slate(request(count=3)) == ["it-1", "it-0", "it-3"]


Observed = tuple[list[float], list[float], list[float]]  # x, y, scale


@pytest.mark.parametrize(
    ("observed", "prior", "expected"),
    [
        # (x, y, scale), (prior mean, prior precision), (posterior precision, mean)
        (([], [], []), (0.0, 1.0), (1.0, 0.0)),  # nothing observed: the prior
        (([], [], []), (0.7, 2.0), (2.0, 0.7)),
        (([1.0], [1.0], [1.0]), (0.0, 1.0), (2.0, 0.5)),
        (([1.0], [1.0], [0.5]), (0.0, 1.0), (1.25, 0.4)),  # regressor 0.5: gram 0.25
        (([1.0, 1.0], [1.0, 0.0], [1.0, 1.0]), (0.0, 1.0), (3.0, 1 / 3)),
        (([2.0], [1.0], [1.0]), (1.0, 4.0), (8.0, (4.0 + 2.0) / 8.0)),  # shrunk toward 1
    ],
)
def test_linear_posterior_after_known_updates(
    observed: Observed, prior: tuple[float, float], expected: tuple[float, float]
) -> None:
    x, y, scale = observed
    evidence = Evidence.empty(1)
    if x:
        evidence.add(np.array(x)[:, np.newaxis], np.array(y), np.array(scale))
    precision, mean = posterior(evidence, np.array([prior[0]]), prior[1])
    assert precision[0, 0] == pytest.approx(expected[0])
    assert mean[0] == pytest.approx(expected[1])


def test_linear_posterior_is_ridge_regression_toward_the_prior_mean() -> None:
    rng = np.random.default_rng(2)
    x, y, scale = rng.standard_normal((30, 3)), rng.random(30), rng.random(30)
    evidence = Evidence.empty(3)
    evidence.add(x[:10], y[:10], scale[:10])
    evidence.add(x[10:], y[10:], scale[10:])
    prior = np.array([0.1, -0.2, 0.3])
    _, mean = posterior(evidence, prior, 2.0)
    design = x * scale[:, np.newaxis]
    expected = np.linalg.solve(2.0 * np.eye(3) + design.T @ design, 2.0 * prior + design.T @ y)
    assert mean == pytest.approx(expected)


def test_posterior_draws_have_the_posterior_covariance() -> None:
    rng = np.random.default_rng(3)
    precision = np.array([[4.0, 1.0], [1.0, 2.0]])
    mean = np.array([0.5, -0.5])
    draws = np.array([draw(rng, precision, mean, 0.5) for _ in range(20_000)])
    assert draws.mean(axis=0) == pytest.approx(mean, abs=0.01)
    assert np.cov(draws.T) == pytest.approx(0.25 * np.linalg.inv(precision), abs=0.005)
    assert draw(rng, precision, mean, 0.0) == pytest.approx(mean)


async def test_linear_thompson_learns_a_user_and_lends_it_to_newcomers() -> None:
    visible = [[1.0, 0.0], [0.0, 1.0], [0.7, 0.7], [-1.0, 0.0]]
    config = LinearThompsonConfig(prior_precision=1.0, exploration=0.01)
    policy = LinearThompson(catalog(visible), EXAMINE, np.random.default_rng(4), config)
    for n in range(40):
        # The user clicks it-0 wherever it is and nothing else.
        await policy.learn(
            request(index=n), ["it-1", "it-0", "it-3"], outcome([False, True, False])
        )
    assert (await policy.slate(request()))[0] == "it-0"
    # A user never seen starts from the population's model: the same taste.
    assert (await policy.slate(request(user_id="newcomer")))[0] == "it-0"


@pytest.mark.parametrize("world", sorted(CHOSEN))
def test_every_world_has_a_configuration_for_every_baseline(world: str) -> None:
    assert set(CHOSEN[world]) == set(BASELINES)


@pytest.mark.parametrize("name", [n for n in BASELINES if n != VW])
async def test_every_baseline_serves_valid_slates_reproducibly(name: str) -> None:
    """A contract for the in-process baselines (VW: tests/unit/test_vw_policy.py)."""
    config = WorldConfig(items=60, categories=4, users=8, slate_size=5)
    world = make_world(config, seed=2)
    stream_of_requests = requests(world, 120, seed=2)
    traces = []
    for _ in range(2):
        policy = await build(name, world, 2, CHOSEN["clicks"][name])
        traces.append(await drive(world, policy, stream_of_requests, seed=2))
        await policy.aclose()
    assert np.array_equal(traces[0].regret, traces[1].regret)
    assert (traces[0].regret >= -1e-12).all()
    assert np.array_equal(
        traces[0].oracle, world.oracle_clicks[[r.user for r in stream_of_requests]]
    )
