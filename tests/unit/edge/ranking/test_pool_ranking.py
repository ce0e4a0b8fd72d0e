"""An edge's ranking of a pool for one user: the same decision as the origin's code makes
from the same numbers, the user's exclusions and preferences, items as the answer shows
them."""

from __future__ import annotations

import numpy as np
import pytest

from edge.cache.prepared_pool import PreparedPool
from edge.ranking.pool_ranking import rank_pool
from protocol.api import RankedItem
from protocol.pools import Pool
from relevance.item_value import value_shift
from relevance.normal import cdf
from relevance.preferences import SHIFT_PER_STRENGTH, excluded, shifts
from relevance.slate import Candidates, decide, mean_scores
from relevance.user_model import UserModel
from tests.pools import make_pool

DIM = 8


def pool(n: int = 60, seed: int = 0, value: np.ndarray | None = None) -> Pool:
    return make_pool(n, DIM, seed, value)


def user(seed: int = 1) -> UserModel:
    rng = np.random.default_rng(seed)
    return UserModel(rng.normal(0, 0.5, DIM).astype(np.float32), np.full(DIM, 0.05, np.float32))


def ranked(p: Pool, *, count: int = 10, seed: int = 3, **more: object) -> list[str]:
    kwargs: dict[str, object] = {
        "count": count,
        "exclude": (),
        "preferences": {},
        "spread": 1 / 3,
        "value_weight": 1.0,
        "rng": np.random.default_rng(seed),
    }
    kwargs.update(more)
    out = rank_pool(p, user(), **kwargs)  # type: ignore[arg-type]
    return [p.item_ids[r] for r in out.rows]


@pytest.mark.parametrize(
    ("diversity", "preselect", "draws"), [(0.0, 100, 63), (0.5, 100, 63), (0.0, 20, 7)]
)
@pytest.mark.parametrize("spread", [0.0, 1 / 3, 1.0])
@pytest.mark.parametrize("count", [1, 10, 60])
def test_the_same_decision_as_the_shared_code_makes(
    spread: float, count: int, diversity: float, preselect: int, draws: int
) -> None:
    p = pool()
    out = rank_pool(
        p,
        user(),
        count=count,
        exclude=(),
        preferences={},
        spread=spread,
        value_weight=1.0,
        rng=np.random.default_rng(5),
        diversity=diversity,
        preselect=preselect,
        draws=draws,
    )
    c = Candidates(
        p.vectors.astype(np.float32),
        p.alpha.astype(np.float64),
        p.beta.astype(np.float64),
        np.zeros(len(p)),
    )
    slate = decide(
        c,
        user(),
        count,
        np.random.default_rng(5),
        spread=spread,
        diversity=diversity,
        preselect=preselect,
        draws=draws,
    )
    assert list(out.rows) == slate.rows.tolist()
    assert list(out.propensities) == slate.propensities.tolist()
    assert out.exploration_applied == bool(slate.exploration.any())
    if spread == 0:
        assert set(out.propensities) == {1.0}
        assert not out.exploration_applied


def test_items_are_as_the_answer_shows_them() -> None:
    p = pool()
    out = rank_pool(
        p,
        user(),
        count=5,
        exclude=(),
        preferences={},
        spread=1.0,
        value_weight=1.0,
        rng=np.random.default_rng(2),
    )
    for rank, (item, row, score) in enumerate(
        zip(out.items, out.rows, out.scores, strict=True), start=1
    ):
        shown = RankedItem.model_validate_json(item.json(rank, explain=True))
        assert shown.item_id == p.item_ids[row]
        assert shown.rank == rank
        assert shown.score == score
        assert 0.0 <= score <= 1.0
        assert shown.explanation is None
        assert shown.metadata.title == f"T{row}"
        assert shown.source in {p.sources[row], "exploration"}


def test_exclusions_and_hidden_categories_never_show() -> None:
    p = pool()
    excluded_ids = set(ranked(p, count=5))
    for seed in range(5):
        shown = ranked(p, count=30, seed=seed, exclude=excluded_ids, preferences={"books": -1.0})
        assert not excluded_ids & set(shown)
        assert all(p.categories[p.item_ids.index(i)] != "books" for i in shown)
        assert len(shown) == 30  # 40 of 60 items are not books; 5 of them at most excluded


def test_a_preferred_category_moves_up() -> None:
    p = pool()
    plain = ranked(p, count=20, spread=0.0)
    liked = ranked(p, count=20, spread=0.0, preferences={"garden": 1.0})

    def gardens(ids: list[str]) -> int:
        return sum(p.categories[p.item_ids.index(i)] == "garden" for i in ids)

    assert gardens(liked) > gardens(plain)
    assert SHIFT_PER_STRENGTH > 0


def test_an_item_worth_more_than_a_click_moves_up() -> None:
    plain = pool()
    last = ranked(plain, count=60, spread=0.0)[-1]
    value = np.ones(60, np.float32)
    value[plain.item_ids.index(last)] = 8.0
    # ranked as if engaged with 8 times as often: well up from the last place
    valued = ranked(pool(value=value), count=60, spread=0.0)
    assert valued.index(last) < 50
    assert ranked(pool(value=value), count=60, spread=0.0, value_weight=0.0)[-1] == last


@pytest.mark.parametrize(("n", "count", "shown"), [(0, 10, 0), (3, 10, 3), (60, 0, 0)])
def test_a_small_pool_gives_what_it_has(n: int, count: int, shown: int) -> None:
    assert len(ranked(pool(n), count=count)) == shown


def test_a_users_taste_changes_the_slate() -> None:
    p = pool()
    target = 7
    taste = UserModel((4.0 * p.vectors[target]).astype(np.float32), np.full(DIM, 1e-3, np.float32))
    out = rank_pool(
        p,
        taste,
        count=3,
        exclude=(),
        preferences={},
        spread=0.0,
        value_weight=1.0,
        rng=np.random.default_rng(0),
    )
    assert out.rows[0] == target


def plainly(
    p: Pool,
    model: UserModel,
    *,
    count: int,
    exclude: frozenset[str],
    preferences: dict[str, float],
    spread: float,
    value_weight: float,
    seed: int,
) -> tuple[list[int], list[float], list[float]]:
    """The pool ranked from its own arrays, row by row, with nothing computed ahead: the
    decision the shared code makes of the same numbers (what ``rank_pool`` did before its
    pools were prepared)."""
    hidden = excluded(preferences)
    keep = [
        n
        for n, (i, c) in enumerate(zip(p.item_ids, p.categories, strict=True))
        if i not in exclude and c not in hidden
    ]
    rows = np.array(keep, np.intp)
    vectors = p.vectors[rows].astype(np.float32)
    alpha, beta = p.alpha[rows].astype(np.float64), p.beta[rows].astype(np.float64)
    shift = shifts([p.categories[n] for n in keep], preferences)
    value = p.value[rows].astype(np.float64)
    if value_weight > 0 and bool(np.any(value != 1.0)):
        mean, _ = mean_scores(Candidates(vectors, alpha, beta, shift), model)
        shift = shift + value_shift(mean, value, value_weight)
    c = Candidates(vectors, alpha, beta, shift)
    slate = decide(c, model, count, np.random.default_rng(seed), spread=spread)
    return rows[slate.rows].tolist(), slate.scores.tolist(), slate.propensities.tolist()


VALUED = np.where(np.arange(80) % 7 == 0, 3.0, 1.0).astype(np.float32)


@pytest.mark.parametrize(
    ("exclude", "preferences", "value"),
    [
        (frozenset(), {}, None),
        (frozenset({"it-003", "it-010", "not-in-the-pool"}), {}, None),
        (frozenset(), {"books": -1.0, "toys": 0.6}, None),
        (frozenset({"it-004"}), {"garden": -0.4}, VALUED),
        (frozenset(), {}, VALUED),
        (frozenset({f"it-{k:03d}" for k in range(0, 80, 3)}), {"toys": -1.0}, VALUED),
    ],
    ids=["plain", "excluded", "hidden-and-liked", "disliked-valued", "valued", "most-out"],
)
@pytest.mark.parametrize("spread", [0.0, 1 / 3, 1.0])
def test_a_prepared_pool_ranks_exactly_as_the_pool_ranked_from_its_arrays(
    exclude: frozenset[str],
    preferences: dict[str, float],
    value: np.ndarray | None,
    spread: float,
) -> None:
    p = make_pool(80, DIM, 4, value)
    prepared = PreparedPool.of(p)
    for seed in range(3):
        options: dict[str, object] = {
            "count": 12,
            "exclude": exclude,
            "preferences": preferences,
            "spread": spread,
            "value_weight": 1.0,
        }
        rows, scores, propensities = plainly(p, user(seed), seed=seed, **options)  # type: ignore[arg-type]
        for given in (prepared, p):
            out = rank_pool(given, user(seed), rng=np.random.default_rng(seed), **options)  # type: ignore[arg-type]
            assert list(out.rows) == rows
            assert list(out.propensities) == propensities
            assert list(out.scores) == [round(float(s), 6) for s in cdf(np.array(scores))]
