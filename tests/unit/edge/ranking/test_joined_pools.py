"""A pool joined with rows of another (a user's own candidates, ``PreparedPool.joined``):
prepared as the joined pool would be, ranked and rendered the same through its parts, its
item draws shared part by part."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from edge.cache.prepared_pool import PreparedPool
from edge.ranking.item_draws import ItemDraws
from edge.ranking.pool_ranking import Drawn, Policy, pool_runs, ranking_of
from protocol.pools import Pool
from relevance.user_model import UserModel
from tests.pools import make_pool

DIM = 8
BASE = PreparedPool.of(make_pool(40, DIM, 0))


def other_pool(n: int = 30) -> Pool:
    pool = make_pool(n, DIM, 5)
    return dataclasses.replace(
        pool,
        item_ids=tuple(f"own-{k:03d}" for k in range(n)),
        categories=tuple(("shoes", "books", "garden")[k % 3] for k in range(n)),
        value=np.linspace(0.5, 2.0, n).astype(np.float32),
    )


OTHER = PreparedPool.of(other_pool(), vector_terms=False)


@pytest.mark.parametrize(
    "rows", [[0], [3, 1, 29], list(range(0, 30, 2))], ids=["one", "three", "half"]
)
def test_joined_is_prepared_as_the_joined_pool_would_be(rows: list[int]) -> None:
    taken = np.array(rows, np.intp)
    joined = BASE.joined(OTHER, taken)
    whole = PreparedPool.of(BASE.pool.joined(OTHER.pool, taken))
    assert joined.pool.item_ids == whole.pool.item_ids
    assert len(joined) == len(BASE) + len(rows)
    for name in ("alpha", "beta", "mean", "var", "keys", "vectors", "squares"):
        assert np.array_equal(getattr(joined.terms, name), getattr(whole.terms, name)), name
    assert dict(joined.rows_of) == dict(whole.rows_of)
    # categories coded by the joined pool's own list: each row's category is the same
    assert [joined.categories[c] for c in joined.category_codes] == list(whole.pool.categories)
    assert np.array_equal(joined.value, whole.value)
    assert joined.valued
    assert joined.heads == whole.heads
    assert joined.sources == whole.sources
    assert joined.parts is not None
    assert joined.parts.base is BASE
    assert joined.parts.other is OTHER


def test_joining_no_rows_is_the_pool_itself() -> None:
    assert BASE.joined(OTHER, np.empty(0, np.intp)) is BASE


def test_a_bank_drawn_over_a_joined_pool_renders_through_its_parts() -> None:
    joined = BASE.joined(OTHER, np.array([2, 7, 11, 20], np.intp))
    model = UserModel(np.full(DIM, 0.4, np.float32), np.full(DIM, 0.05, np.float32))
    policy = Policy(count=10, spread=1 / 3, value_weight=1.0)
    every = pool_runs(
        joined, model, policy, exclude=(), preferences={}, rng=np.random.default_rng(1)
    )
    drawn = Drawn.of(every, joined)
    assert drawn.parts is joined.parts
    assert drawn.nbytes == Drawn.of(every).nbytes + joined.parts.rows.nbytes
    for run in range(len(drawn)):
        # served from the bank with the base pool at hand, as the edge does
        through_parts = ranking_of(BASE, drawn, run)
        whole = ranking_of(joined, Drawn.of(every), run)
        assert through_parts == whole


def test_item_draws_of_a_joined_pool_are_each_parts_shared_draws() -> None:
    draws = ItemDraws()
    joined = BASE.joined(OTHER, np.array([4, 9], np.intp))
    rng = np.random.default_rng(0)
    base = draws.for_bank(BASE.terms, 1 / 3, 8, rng)
    got = draws.for_pool(joined, 1 / 3, 8, rng)
    assert got.shape == (8, len(joined))
    assert np.array_equal(got[:, : len(BASE)], base)  # the pool's draws, shared
    own = draws.for_pool(BASE.joined(OTHER, np.array([9, 4], np.intp)), 1 / 3, 8, rng)
    # the other part's draws are shared too, column by row
    assert np.array_equal(own[:, len(BASE)], got[:, len(BASE) + 1])
    # counted once per bank: the pool's draws made or shared
    assert (draws.counters.drawn, draws.counters.shared) == (1, 2)
