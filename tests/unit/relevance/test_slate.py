from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relevance.item_posteriors import probit_means
from relevance.slate import (
    DRAWS,
    TIE,
    Candidates,
    ItemTerms,
    Runs,
    Slate,
    decide,
    mean_scores,
    preselected,
    runs,
    tie_keys,
)
from relevance.user_model import UserModel

DIM = 8


def candidates(
    n: int,
    seed: int = 0,
    *,
    alpha: np.ndarray | None = None,
    beta: np.ndarray | None = None,
    vectors: np.ndarray | None = None,
    shift: np.ndarray | None = None,
) -> Candidates:
    rng = np.random.default_rng(seed)
    if vectors is None:
        vectors = rng.standard_normal((n, DIM))
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return Candidates(
        vectors=np.asarray(vectors, np.float32),
        alpha=alpha if alpha is not None else rng.uniform(1.0, 20.0, n),
        beta=beta if beta is not None else rng.uniform(1.0, 200.0, n),
        shift=shift if shift is not None else np.zeros(n),
    )


def basis(*dims: int) -> np.ndarray:
    out = np.zeros((len(dims), DIM), np.float32)
    for row, d in enumerate(dims):
        out[row, d] = 1.0
    return out


@pytest.mark.parametrize("user", [None, UserModel.prior(DIM)], ids=["segment", "user"])
@pytest.mark.parametrize(
    ("n", "count", "diversity"),
    [(30, 5, 0.0), (30, 5, 0.5), (30, 30, 0.0), (4, 10, 0.0), (4, 10, 0.3), (1, 1, 0.0)],
    ids=["five-of-30", "five-diverse", "all", "more-than-there-are", "more-diverse", "one"],
)
def test_a_slate_is_count_distinct_rows_with_propensities(
    user: UserModel | None, n: int, count: int, diversity: float
) -> None:
    c = candidates(n)
    slate = decide(c, user, count, np.random.default_rng(1), diversity=diversity)
    expected = min(count, n)
    assert len(slate) == expected
    assert len(set(slate.rows.tolist())) == expected
    assert ((slate.rows >= 0) & (slate.rows < n)).all()
    assert slate.scores.shape == slate.propensities.shape == slate.exploration.shape
    assert slate.exploration.dtype == bool
    # at least the served run's own share, at most certain
    assert (slate.propensities >= 1 / (DRAWS + 1) - 1e-12).all()
    assert (slate.propensities <= 1.0).all()
    assert np.isfinite(slate.scores).all()
    if diversity == 0:
        # best first, by the drawn scores
        assert (np.diff(slate.scores) <= 0).all()


@pytest.mark.parametrize("count", [0, 3], ids=["nothing-asked", "no-candidates"])
def test_no_candidates_or_nothing_asked_is_an_empty_slate(count: int) -> None:
    c = candidates(0) if count else candidates(5)
    slate = decide(c, UserModel.prior(DIM), count, np.random.default_rng(0))
    assert len(slate) == 0
    assert slate.rows.shape == slate.scores.shape == slate.propensities.shape == (0,)
    assert slate.exploration.shape == (0,)


@pytest.mark.parametrize("diversity", [0.0, 0.4])
@pytest.mark.parametrize("user", [None, UserModel.prior(DIM)], ids=["segment", "user"])
def test_without_spread_the_slate_is_greedy_by_mean_score(
    diversity: float, user: UserModel | None
) -> None:
    c = candidates(40, seed=3)
    slate = decide(c, user, 6, np.random.default_rng(0), spread=0.0, diversity=diversity)
    mean, _ = mean_scores(c, user)
    if diversity == 0:
        assert slate.rows.tolist() == np.argsort(-mean, kind="stable")[:6].tolist()
    np.testing.assert_allclose(slate.scores, mean[slate.rows])
    assert (slate.propensities == 1.0).all()
    assert not slate.exploration.any()
    # the same slate whatever the generator
    again = decide(c, user, 6, np.random.default_rng(99), spread=0.0, diversity=diversity)
    assert np.array_equal(slate.rows, again.rows)


def test_mean_scores_add_the_item_the_user_and_the_shift() -> None:
    c = candidates(5, seed=2, shift=np.array([0.0, 0.5, -0.5, 0.0, 1.0]))
    user = UserModel(np.linspace(-0.5, 0.5, DIM, dtype=np.float32), np.full(DIM, 0.02, np.float32))
    mean, sd = mean_scores(c, user)
    item_only, item_sd = mean_scores(c, None)
    np.testing.assert_allclose(item_only, probit_means(c.alpha, c.beta) + c.shift)
    np.testing.assert_allclose(mean, item_only + c.vectors.astype(float) @ user.mean)
    # the user's uncertainty adds to the item's
    assert (sd > item_sd).all()
    np.testing.assert_allclose(sd**2, item_sd**2 + (c.vectors.astype(float) ** 2) @ user.var)


def test_a_users_factor_adds_its_variance_along_each_item() -> None:
    c = candidates(5, seed=3)
    diagonal = UserModel(np.zeros(DIM, np.float32), np.full(DIM, 0.02, np.float32))
    factor = np.linspace(-0.3, 0.3, 2 * DIM, dtype=np.float32).reshape(DIM, 2)
    with_factor = UserModel(diagonal.mean, diagonal.var, factor)
    _, plain = mean_scores(c, diagonal)
    _, wider = mean_scores(c, with_factor)
    along = c.vectors.astype(float) @ factor.astype(float)
    np.testing.assert_allclose(wider**2, plain**2 + (along**2).sum(axis=1))


def test_uncertain_items_have_wider_scores() -> None:
    c = candidates(2, alpha=np.array([2.0, 200.0]), beta=np.array([8.0, 800.0]))
    _, sd = mean_scores(c, None)
    assert sd[0] > 5 * sd[1]


def test_a_certain_user_model_ranks_the_item_it_matches_first() -> None:
    vectors = basis(0, 1, 2, 3, 4)
    same = np.full(5, 10.0)
    c = candidates(5, alpha=same, beta=same * 9, vectors=vectors)
    mean = np.zeros(DIM, np.float32)
    mean[3] = 3.0
    user = UserModel(mean, np.full(DIM, 1e-4, np.float32))
    for seed in range(20):
        slate = decide(c, user, 3, np.random.default_rng(seed))
        assert slate.rows[0] == 3
        assert slate.propensities[0] == 1.0
        assert not slate.exploration[0]


def test_a_stated_preference_shifts_the_ranking() -> None:
    same = np.full(6, 50.0)
    shift = np.zeros(6)
    shift[4] = 3.0
    c = candidates(6, alpha=same, beta=same * 4, shift=shift)
    slate = decide(c, None, 2, np.random.default_rng(0))
    assert slate.rows[0] == 4


def test_diversity_makes_near_duplicates_give_way() -> None:
    near = np.array([1.0, 0.05, 0, 0, 0, 0, 0, 0])
    vectors = np.stack([basis(0)[0], near / np.linalg.norm(near), basis(5)[0]])
    # the duplicates engage 50% of the time, the distinct item 20%
    c = candidates(
        3, alpha=np.array([50.0, 50.0, 20.0]), beta=np.array([50.0, 50.0, 80.0]), vectors=vectors
    )
    plain = decide(c, None, 2, np.random.default_rng(0), spread=0.0)
    assert sorted(plain.rows.tolist()) == [0, 1]
    diverse = decide(c, None, 2, np.random.default_rng(0), spread=0.0, diversity=1.0)
    assert diverse.rows.tolist() == [0, 2]
    # relevance-weighted: a small penalty does not outweigh a large lead in score
    mild = decide(c, None, 2, np.random.default_rng(0), spread=0.0, diversity=0.2)
    assert sorted(mild.rows.tolist()) == [0, 1]


def test_diversity_spreads_a_slate_over_clusters() -> None:
    rng = np.random.default_rng(5)
    centres = np.eye(DIM)[:4]
    # ten near-copies of each of four directions, the first cluster the most engaging
    vectors = np.repeat(centres, 10, axis=0) + 0.02 * rng.standard_normal((40, DIM))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    alpha = np.repeat([60.0, 40.0, 30.0, 20.0], 10)
    c = candidates(40, alpha=alpha, beta=100.0 - alpha, vectors=vectors)
    cluster = np.arange(40) // 10
    plain = decide(c, None, 4, np.random.default_rng(0), spread=0.0)
    diverse = decide(c, None, 4, np.random.default_rng(0), spread=0.0, diversity=2.0)
    assert set(cluster[plain.rows].tolist()) == {0}
    assert sorted(cluster[diverse.rows].tolist()) == [0, 1, 2, 3]


def test_only_the_preselected_candidates_take_part() -> None:
    c = candidates(50, seed=8)
    mean, sd = mean_scores(c, None)
    optimistic = set(np.argsort(-(mean + 2.0 * sd))[:5].tolist())
    for seed in range(10):
        slate = decide(c, None, 3, np.random.default_rng(seed), preselect=5)
        assert set(slate.rows.tolist()) <= optimistic
    # a pre-selection smaller than the slate still fills it
    assert len(decide(c, None, 8, np.random.default_rng(0), preselect=5)) == 8


@pytest.mark.parametrize(
    ("optimistic", "k", "taken"),
    [
        ([0.3, 0.1, 0.2], 2, [0, 2]),  # the best k, best first
        ([0.3, 0.1, 0.2], 5, [0, 2, 1]),  # fewer than k: all of them
        ([1.0, 0.5, 0.5, 0.5, 0.0], 2, [0, 1, 2, 3]),  # a tie across the k-th place: whole
        ([1.0, 0.5, 0.5 + TIE / 2, 0.5 - TIE / 2, 0.0], 2, [0, 2, 1, 3]),  # within TIE: tied
        ([1.0, 0.5, 0.5 - 2 * TIE, 0.0], 2, [0, 1]),  # farther than TIE: not
        ([], 3, []),
    ],
)
def test_preselection_takes_the_best_and_every_candidate_tied_with_the_last(
    optimistic: list[float], k: int, taken: list[int]
) -> None:
    assert preselected(np.array(optimistic), k).tolist() == taken


@pytest.mark.parametrize(
    ("optimistic", "keys", "k", "taken"),
    [
        # a tie across the k-th place: the smallest keys of it fill the places left
        ([1.0, 0.5, 0.5, 0.5, 0.0], [9, 7, 3, 5, 1], 2, [0, 2]),
        ([1.0, 0.5, 0.5, 0.5, 0.0], [9, 7, 3, 5, 1], 3, [0, 2, 3]),
        # within TIE is tied, whatever the order the scores' rounding gives
        ([1.0, 0.5 + TIE / 2, 0.5, 0.5 - TIE / 2, 0.0], [9, 7, 3, 5, 1], 2, [0, 2]),
        # no tie: the best k, the keys unread
        ([1.0, 0.5, 0.5 - 2 * TIE, 0.0], [9, 7, 3, 1], 2, [0, 1]),
        # everything tied (a cold start): k of them by key alone
        ([0.2] * 6, [6, 5, 4, 3, 2, 1], 3, [3, 4, 5]),
    ],
)
def test_a_tie_at_the_last_place_is_broken_by_key(
    optimistic: list[float], keys: list[int], k: int, taken: list[int]
) -> None:
    rows = preselected(np.array(optimistic), k, np.array(keys, np.uint32))
    assert sorted(rows.tolist()) == sorted(taken)
    assert len(rows) == k


def test_a_cold_start_preselects_alike_whatever_the_rows_order_and_the_rounding() -> None:
    """Every candidate at the prior: their optimistic scores differ by the rounding of
    their vectors alone (an edge's float16 ones, the catalog's float32 ones a replay reads)
    and come in another order; the same ``preselect`` are taken, by their ids' keys, where
    a cut by score would take whichever the rounding favoured."""
    rng = np.random.default_rng(3)
    n, dim, k = 60, 16, 10
    vectors = rng.normal(size=(n, dim))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"it-{i:04d}" for i in range(n)]
    user = UserModel(np.zeros(dim, np.float32), np.full(dim, 2.0 / dim, np.float32))
    taken, whole = [], []
    for stored, order in ((np.float32, np.arange(n)), (np.float16, rng.permutation(n))):
        v = vectors[order].astype(stored).astype(np.float32)
        keys = tie_keys(ids[i] for i in order)
        c = Candidates(v, np.ones(n), np.full(n, 9.0), np.zeros(n), keys=keys)
        mean, sd = mean_scores(c, user)
        taken.append({ids[i] for i in order[preselected(mean + 2.0 * sd, k, keys)]})
        whole.append(set(order[preselected(mean + 2.0 * sd, k)].tolist()))
    assert taken[0] == taken[1]
    assert len(taken[0]) == k
    assert whole[0] == whole[1] == set(range(n))  # without keys: the tie taken whole


def test_tie_keys_are_a_hash_of_the_id_alone() -> None:
    keys = tie_keys(["it-1", "it-2", "it-1"])
    assert keys.dtype == np.uint32
    assert keys[0] == keys[2] != keys[1]
    assert tie_keys([]).shape == (0,)


def test_exploration_marks_what_the_means_would_not_have_shown() -> None:
    c = candidates(30, seed=4)
    mean, _ = mean_scores(c, None)
    greedy = set(np.argsort(-mean)[:5].tolist())
    explored = 0
    for seed in range(30):
        slate = decide(c, None, 5, np.random.default_rng(seed))
        expected = [int(r) not in greedy for r in slate.rows]
        assert slate.exploration.tolist() == expected
        explored += sum(expected)
    assert explored > 0


def test_decide_is_reproducible_from_the_seed() -> None:
    c = candidates(30, seed=6)
    user = UserModel.prior(DIM)
    a = decide(c, user, 5, np.random.default_rng(3), diversity=0.3)
    b = decide(c, user, 5, np.random.default_rng(3), diversity=0.3)
    for field in ("rows", "scores", "propensities", "exploration"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field


def test_propensities_estimate_how_often_the_policy_puts_an_item_there() -> None:
    # three items of close rates, no user term: each is first some of the time
    alpha, beta = np.array([12.0, 10.0, 8.0]), np.array([88.0, 90.0, 92.0])
    c = candidates(3, alpha=alpha, beta=beta, vectors=basis(0, 1, 2))
    # the truth, independently: Φ⁻¹ is monotone, so first by probit draw is first by rate
    rates = np.random.default_rng(123).beta(alpha, beta, size=(400_000, 3))
    truth = np.bincount(np.argmax(rates, axis=1), minlength=3) / rates.shape[0]
    runs = 800
    firsts = np.empty(runs, np.intp)
    reported = np.empty(runs)
    for seed in range(runs):
        slate = decide(c, None, 1, np.random.default_rng(seed))
        firsts[seed], reported[seed] = slate.rows[0], slate.propensities[0]
    for item in range(3):
        share = float(np.mean(firsts == item))
        assert share == pytest.approx(truth[item], abs=4 * np.sqrt(truth[item] / runs))
        # a served item's propensity counts the served run and DRAWS more: its expectation
        # given that it was served is (1 + DRAWS * p) / (DRAWS + 1)
        expected = (1 + DRAWS * truth[item]) / (DRAWS + 1)
        assert float(reported[firsts == item].mean()) == pytest.approx(expected, abs=0.02)


def test_fewer_draws_give_coarser_propensities() -> None:
    c = candidates(20, seed=1)
    slate = decide(c, None, 4, np.random.default_rng(0), draws=3)
    # four runs: shares in quarters
    np.testing.assert_allclose(slate.propensities * 4, np.round(slate.propensities * 4))
    assert (slate.propensities >= 0.25).all()


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=0, max_value=25),
    count=st.integers(min_value=0, max_value=30),
    diversity=st.sampled_from([0.0, 0.3, 2.0]),
    spread=st.sampled_from([0.0, 0.5, 1.0]),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_any_decision_is_a_valid_slate(
    n: int, count: int, diversity: float, spread: float, seed: int
) -> None:
    c = candidates(n, seed=seed % 1000)
    slate = decide(
        c,
        UserModel.prior(DIM),
        count,
        np.random.default_rng(seed),
        spread=spread,
        diversity=diversity,
        draws=15,
    )
    assert len(slate) == min(n, count)
    assert len(set(slate.rows.tolist())) == len(slate)
    assert ((slate.propensities > 0) & (slate.propensities <= 1)).all()
    assert np.isfinite(slate.scores).all()


def same_slate(a: Slate, b: Slate) -> bool:
    return (
        np.array_equal(a.rows, b.rows)
        and np.array_equal(a.scores, b.scores)
        and np.array_equal(a.propensities, b.propensities)
        and np.array_equal(a.exploration, b.exploration)
    )


@pytest.mark.parametrize("user", [None, UserModel.prior(DIM, 4.0)], ids=["segment", "user"])
@pytest.mark.parametrize(
    ("spread", "diversity"), [(1.0, 0.0), (1 / 3, 0.0), (0.0, 0.0), (1.0, 0.4)]
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_terms_computed_ahead_decide_exactly_as_computed_per_decision(
    user: UserModel | None, spread: float, diversity: float, seed: int
) -> None:
    c = candidates(150, seed=seed, shift=np.random.default_rng(seed).normal(0, 0.2, 150))
    terms = ItemTerms.of(c.vectors.astype(np.float16), c.alpha, c.beta).with_vector_terms()
    plain = Candidates(c.vectors.astype(np.float16).astype(np.float32), c.alpha, c.beta, c.shift)
    ahead = Candidates.with_terms(terms, c.shift)
    options = {"spread": spread, "diversity": diversity, "preselect": 40}
    want = decide(plain, user, 12, np.random.default_rng(seed), **options)  # type: ignore[arg-type]
    got = decide(ahead, user, 12, np.random.default_rng(seed), **options)  # type: ignore[arg-type]
    assert same_slate(got, want)
    for a, b in zip(mean_scores(ahead, user), mean_scores(plain, user), strict=True):
        assert np.array_equal(a, b)
    # some of the candidates: the terms taken, as the candidates' own arrays sliced
    rows = np.flatnonzero(np.random.default_rng(seed).random(150) < 0.7)
    sliced = Candidates(plain.vectors[rows], c.alpha[rows], c.beta[rows], c.shift[rows])
    want = decide(sliced, user, 12, np.random.default_rng(seed), **options)  # type: ignore[arg-type]
    taken = Candidates.with_terms(terms.take(rows), c.shift[rows])
    got = decide(taken, user, 12, np.random.default_rng(seed), **options)  # type: ignore[arg-type]
    assert same_slate(got, want)


RUNS_CASES = [
    # n, count, spread, diversity, draws: runs expected
    (30, 5, 1.0, 0.0, DRAWS, DRAWS + 1),
    (30, 5, 1 / 3, 0.5, DRAWS, DRAWS + 1),
    (30, 5, 1.0, 0.0, 7, 8),
    (30, 5, 0.0, 0.0, DRAWS, 1),
    (4, 10, 1.0, 0.3, DRAWS, DRAWS + 1),
    (30, 0, 1.0, 0.0, DRAWS, 1),
]


@pytest.mark.parametrize("user", [None, UserModel.prior(DIM)], ids=["segment", "user"])
@pytest.mark.parametrize("case", RUNS_CASES)
def test_decide_serves_the_first_of_the_runs_with_its_propensities_from_all(
    user: UserModel | None, case: tuple[int, int, float, float, int, int]
) -> None:
    n, count, spread, diversity, draws, expected = case
    c = candidates(n)
    every = runs(
        c, user, count, np.random.default_rng(4), spread=spread, diversity=diversity, draws=draws
    )
    slate = decide(
        c, user, count, np.random.default_rng(4), spread=spread, diversity=diversity, draws=draws
    )
    assert len(every) == expected
    assert every.rows.shape == every.scores.shape == every.exploration.shape
    first = every.slate(0)
    for served, direct in zip(
        (first.rows, first.scores, first.propensities, first.exploration),
        (slate.rows, slate.scores, slate.propensities, slate.exploration),
        strict=True,
    ):
        assert served.tolist() == direct.tolist()


@pytest.mark.parametrize("run", [0, 1, 17, DRAWS])
def test_any_run_is_served_as_decide_serves_its_first(run: int) -> None:
    """The propensities of a run depend on which run it is only through what it shows: the
    runs reordered with ``run`` first, ``decide``'s place, give ``run`` the same slate."""
    every = runs(candidates(40), UserModel.prior(DIM), 6, np.random.default_rng(9))
    order = [run, *(k for k in range(len(every)) if k != run)]
    moved = Runs(every.rows[order], every.scores[order], every.exploration[order])
    served, as_first = every.slate(run), moved.slate(0)
    assert served.rows.tolist() == as_first.rows.tolist() == every.rows[run].tolist()
    assert served.scores.tolist() == as_first.scores.tolist()
    assert served.propensities.tolist() == as_first.propensities.tolist()
    assert served.exploration.tolist() == as_first.exploration.tolist()
    assert all(1 / len(every) <= p <= 1 for p in served.propensities)


def test_the_runs_are_independent_draws_not_copies() -> None:
    every = runs(candidates(40), UserModel.prior(DIM), 6, np.random.default_rng(9))
    assert len({tuple(r) for r in every.rows.tolist()}) > len(every) // 2
    assert len({tuple(s) for s in every.scores.tolist()}) == len(every)


@pytest.mark.parametrize("case", RUNS_CASES)
def test_every_propensity_is_each_runs_propensities_at_once(
    case: tuple[int, int, float, float, int, int],
) -> None:
    n, count, spread, diversity, draws, _ = case
    every = runs(
        candidates(n),
        UserModel.prior(DIM),
        count,
        np.random.default_rng(6),
        spread=spread,
        diversity=diversity,
        draws=draws,
    )
    at_once = every.every_propensity()
    assert at_once.shape == every.rows.shape
    for run in range(len(every)):
        assert at_once[run].tolist() == every.propensities(run).tolist()
