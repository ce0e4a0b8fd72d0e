from __future__ import annotations

import numpy as np
import pytest

from protocol.exceptions import MalformedMessage
from relevance.population import (
    MAX_VAR_SHARE,
    MIN_USERS,
    MIN_VAR_SHARE,
    Population,
    estimate,
    for_ranking,
    learnt,
    population_bytes,
    population_from_bytes,
    scaled,
    under,
)
from relevance.user_model import UserModel

DIM = 6
LEARNT_VAR = 0.25


def model(mean: list[float], var: list[float]) -> UserModel:
    return UserModel(np.array(mean, np.float32), np.array(var, np.float32))


def population(mean: float = 0.3, var: float = 0.1, version: int = 1) -> Population:
    return Population(version, np.full(DIM, mean, np.float32), var, 500)


def with_evidence(evidence: float, *, seed: int, least: float) -> UserModel:
    """A stored model whose evidence per dimension is ``evidence`` times a share drawn
    from [``least``, 1.5), around a random mean."""
    rng = np.random.default_rng(seed)
    var = 1.0 / (1.0 / LEARNT_VAR + evidence * rng.uniform(least, 1.5, DIM))
    return UserModel(rng.normal(0, 0.3, DIM).astype(np.float32), var.astype(np.float32))


def test_a_model_with_no_evidence_is_the_population_prior_itself() -> None:
    prior = UserModel.prior(DIM, LEARNT_VAR * DIM)
    got = under(prior, LEARNT_VAR, population())
    assert got.mean == pytest.approx(np.full(DIM, 0.3))
    assert got.var == pytest.approx(np.full(DIM, 0.1))


@pytest.mark.parametrize("evidence", [0.0, 1.0, 40.0, 3000.0])
def test_under_and_learnt_are_each_others_inverse(evidence: float) -> None:
    stored = with_evidence(evidence, seed=3, least=0.5)
    pop = population()
    back = learnt(under(stored, LEARNT_VAR, pop), LEARNT_VAR, pop)
    assert back.mean == pytest.approx(stored.mean, rel=1e-4, abs=1e-6)
    assert back.var == pytest.approx(stored.var, rel=1e-4)


def test_the_population_moves_and_narrows_what_the_evidence_says() -> None:
    stored = model([0.4] * DIM, [0.2] * DIM)  # 1/0.2 - 1/0.25: a precision of 1 of evidence
    pop = population(mean=0.0, var=LEARNT_VAR)
    # a population equal to the learnt prior changes nothing
    same = under(stored, LEARNT_VAR, pop)
    assert same.mean == pytest.approx(stored.mean)
    assert same.var == pytest.approx(stored.var)
    # a tighter population pulls the mean toward its own and narrows the posterior
    tight = under(stored, LEARNT_VAR, population(mean=-0.2, var=0.05))
    assert (tight.mean < stored.mean).all()
    assert (tight.var < stored.var).all()


def test_no_population_or_another_dimension_leaves_the_model_as_learnt() -> None:
    stored = model([0.1] * DIM, [0.2] * DIM)
    assert under(stored, LEARNT_VAR, None) is stored
    assert learnt(stored, LEARNT_VAR, None) is stored
    other = Population(1, np.zeros(DIM + 1, np.float32), 0.1, 50)
    assert under(stored, LEARNT_VAR, other) is stored


def test_a_policys_prior_strength_scales_the_spread() -> None:
    pop = population(var=0.1)
    assert scaled(pop, 1.0) is pop
    assert scaled(pop, 2.0).var == pytest.approx(0.2)
    assert scaled(pop, 2.0).mean is pop.mean


def users_of(true_mean: np.ndarray, true_var: float, n: int, seed: int) -> list[UserModel]:
    """Users whose tastes are drawn from N(true_mean, true_var I) and observed with
    Gaussian evidence of varying precision, stored as learnt under N(0, LEARNT_VAR I)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        taste = true_mean + rng.normal(0, np.sqrt(true_var), DIM)
        precision = rng.uniform(2, 60, DIM)
        seen = taste + rng.normal(0, 1 / np.sqrt(precision))
        var = 1 / (1 / LEARNT_VAR + precision)
        out.append(UserModel((var * precision * seen).astype(np.float32), var.astype(np.float32)))
    return out


def test_estimate_finds_where_the_users_are_and_how_far_they_spread() -> None:
    true_mean = np.linspace(-0.4, 0.4, DIM)
    got = estimate(users_of(true_mean, 0.09, 3000, seed=1), LEARNT_VAR, iterations=50)
    assert got is not None
    assert got.rank == 0
    assert got.version == 0
    assert got.users == 3000
    assert got.mean == pytest.approx(true_mean, abs=0.03)
    assert got.var == pytest.approx(0.09, rel=0.1)


def test_estimate_needs_enough_users_and_keeps_the_spread_in_bounds() -> None:
    few = users_of(np.zeros(DIM), 0.09, MIN_USERS - 1, seed=2)
    assert estimate(few, LEARNT_VAR) is None
    # users all alike: the spread stops at its floor, not at zero
    alike = [model([0.2] * DIM, [1e-4] * DIM) for _ in range(MIN_USERS)]
    got = estimate(alike, LEARNT_VAR)
    assert got is not None
    assert got.var == pytest.approx(MIN_VAR_SHARE * LEARNT_VAR)
    # wildly spread users: at its ceiling
    wild = users_of(np.zeros(DIM), 100.0, 200, seed=3)
    got = estimate(wild, LEARNT_VAR)
    assert got is not None
    assert got.var == pytest.approx(MAX_VAR_SHARE * LEARNT_VAR)


def test_population_bytes_round_trip() -> None:
    pop = Population(7, np.linspace(-1, 1, DIM).astype(np.float32), 0.125, 4321)
    back = population_from_bytes(population_bytes(pop))
    assert (back.version, back.users, back.var) == (7, 4321, 0.125)
    assert np.array_equal(back.mean, pop.mean)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"\x01\x02", "shorter than its header"),
        (population_bytes(population())[:-4], "is 38 bytes, not 34"),
        (population_bytes(Population(1, np.full(DIM, np.nan, np.float32), 0.1, 1)), "non-finite"),
        (population_bytes(Population(1, np.zeros(DIM, np.float32), 0.0, 1)), "not > 0"),
    ],
)
def test_damaged_population_bytes_are_refused(raw: bytes, problem: str) -> None:
    with pytest.raises(MalformedMessage, match=problem):
        population_from_bytes(raw)


def rank_two(var: float = 0.02) -> Population:
    """A prior whose tastes co-vary along two directions, much more than elsewhere."""
    basis, _ = np.linalg.qr(np.random.default_rng(5).normal(size=(DIM, 2)))
    return Population(
        3,
        np.linspace(-0.2, 0.2, DIM).astype(np.float32),
        var,
        900,
        basis=basis.astype(np.float32),
        spread=np.array([0.5, 0.2], np.float32),
    )


def dense_posterior(stored: UserModel, pop: Population) -> tuple[np.ndarray, np.ndarray]:
    """The Gaussian posterior of ``stored``'s evidence under ``pop``, by dense algebra."""
    assert pop.basis is not None
    assert pop.spread is not None
    cov = pop.var * np.eye(DIM) + pop.basis.astype(np.float64) @ np.diag(
        pop.spread.astype(np.float64)
    ) @ pop.basis.T.astype(np.float64)
    var = stored.var.astype(np.float64)
    precision = np.diag(np.maximum(1 / var - 1 / LEARNT_VAR, 0))
    post_cov = np.linalg.inv(np.linalg.inv(cov) + precision)
    post_mean = post_cov @ (stored.mean / var + np.linalg.solve(cov, pop.mean.astype(np.float64)))
    return post_mean, post_cov


@pytest.mark.parametrize("evidence", [0.0, 1.0, 40.0, 3000.0])
def test_for_ranking_is_the_gaussian_posterior_under_the_whole_prior(evidence: float) -> None:
    stored = with_evidence(evidence, seed=4, least=0.0)
    pop = rank_two()
    got = for_ranking(stored, LEARNT_VAR, pop)
    assert got.factor is not None
    assert got.factor.shape == (DIM, 2)
    mean, cov = dense_posterior(stored, pop)
    assert got.mean == pytest.approx(mean, rel=1e-4, abs=1e-5)
    covariance = np.diag(got.var.astype(np.float64)) + got.factor @ got.factor.T
    assert covariance == pytest.approx(cov, rel=1e-3, abs=1e-6)


def test_one_item_moves_the_user_along_the_directions_tastes_co_vary_in() -> None:
    pop = rank_two()
    assert pop.basis is not None
    item = np.zeros(DIM)
    item[0] = 1.0  # evidence on the first dimension alone
    precision = np.where(item > 0, 20.0, 0.0)
    var = 1 / (1 / LEARNT_VAR + precision)
    stored = UserModel((var * precision * 0.8).astype(np.float32), var.astype(np.float32))
    moved = (
        for_ranking(stored, LEARNT_VAR, pop).mean
        - for_ranking(UserModel.prior(DIM, LEARNT_VAR * DIM), LEARNT_VAR, pop).mean
    )
    diagonal = under(stored, LEARNT_VAR, pop).mean - pop.mean
    # the diagonal prior moves the first dimension alone; the whole prior moves the others
    # too, along the co-varying directions that load on it
    assert np.abs(diagonal[1:]).max() < 1e-6
    expected = pop.basis @ (pop.basis[0] * pop.spread)  # the prior's covariance with dim 0
    assert np.sign(moved[1:]) == pytest.approx(np.sign(expected[1:]))


def test_rank_zero_ranks_under_the_diagonal_and_under_uses_the_marginal_variance() -> None:
    stored = model([0.1] * DIM, [0.2] * DIM)
    flat = population()
    assert np.array_equal(
        for_ranking(stored, LEARNT_VAR, flat).mean, under(stored, LEARNT_VAR, flat).mean
    )
    assert for_ranking(stored, LEARNT_VAR, flat).factor is None
    assert for_ranking(stored, LEARNT_VAR, None) is stored
    pop = rank_two()
    nothing = under(UserModel.prior(DIM, LEARNT_VAR * DIM), LEARNT_VAR, pop)
    assert nothing.var == pytest.approx(pop.marginal())
    back = learnt(under(stored, LEARNT_VAR, pop), LEARNT_VAR, pop)
    assert back.mean == pytest.approx(stored.mean, rel=1e-4, abs=1e-6)


def test_scaling_a_prior_of_rank_scales_both_spreads() -> None:
    pop = rank_two(var=0.02)
    got = scaled(pop, 2.0)
    assert got.var == pytest.approx(0.04)
    assert got.spread == pytest.approx(np.array([1.0, 0.4]))
    assert got.basis is pop.basis


def co_varying_users(n: int, seed: int) -> tuple[list[UserModel], np.ndarray]:
    """Users whose tastes spread mostly along one hidden direction, observed with diagonal
    Gaussian evidence; and that direction."""
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=DIM)
    direction /= np.linalg.norm(direction)
    out = []
    for _ in range(n):
        taste = rng.normal(0, 0.6) * direction + rng.normal(0, 0.05, DIM)
        precision = rng.uniform(5, 60, DIM)
        seen = taste + rng.normal(0, 1 / np.sqrt(precision))
        var = 1 / (1 / LEARNT_VAR + precision)
        out.append(UserModel((var * precision * seen).astype(np.float32), var.astype(np.float32)))
    return out, direction


def test_estimate_of_rank_finds_the_direction_tastes_co_vary_in() -> None:
    users, direction = co_varying_users(2000, seed=6)
    got = estimate(users, LEARNT_VAR, rank=1, iterations=30)
    assert got is not None
    assert got.rank == 1
    assert got.basis is not None
    assert got.spread is not None
    assert abs(float(got.basis[:, 0] @ direction)) > 0.98
    assert float(got.spread[0]) == pytest.approx(0.36, rel=0.2)
    assert got.var < 0.02
    # from a prior of rank 0 (or another rank) it starts again, and says the same
    start = estimate(users, LEARNT_VAR)
    again = estimate(users, LEARNT_VAR, start, rank=1, iterations=30)
    assert again is not None
    assert again.basis is not None
    assert abs(float(again.basis[:, 0] @ direction)) > 0.98


def test_population_bytes_of_rank_round_trip() -> None:
    pop = rank_two()
    back = population_from_bytes(population_bytes(pop))
    assert back.rank == 2
    assert back.var == pytest.approx(pop.var)
    assert back.basis is not None
    assert back.spread is not None
    assert np.array_equal(back.basis, pop.basis)
    assert np.array_equal(back.spread, pop.spread)


def test_damaged_population_bytes_of_rank_are_refused() -> None:
    raw = population_bytes(rank_two())
    with pytest.raises(MalformedMessage, match="rank 2 is"):
        population_from_bytes(raw[:-4])
    negative = rank_two()
    assert negative.spread is not None
    negative.spread[1] = -0.1
    with pytest.raises(MalformedMessage, match="negative spread"):
        population_from_bytes(population_bytes(negative))
