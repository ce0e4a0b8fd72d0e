"""Pools of smaller sizes read off a larger one (against the origin's ``build_pool``), recall,
and the size the benchmark recommends."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.pool_sizing import pool_at_size, recall, recommended_size, restricted
from origin.catalog.item_index import ItemIndex
from origin.ranking.pools import build_pool
from origin.ranking.retrieval import Candidates, Source
from protocol.pools import Pool
from tests.unit.catalogs import make_catalog

DIM = 8
CANDIDATES = 40


@pytest.fixture(scope="module")
def index() -> ItemIndex:
    return make_catalog(60, 5, DIM).index()


def built(index: ItemIndex, size: int, answer: list[int], seed: int) -> Pool:
    """A pool of ``size`` from the same 40 candidates and posteriors whatever the size."""
    rng = np.random.default_rng(seed)
    rows = np.arange(10, 10 + CANDIDATES, dtype=np.intp)
    return build_pool(
        index,
        Candidates(rows, np.full(CANDIDATES, int(Source.TRENDING), np.int8)),
        alpha=rng.uniform(1.0, 50.0, CANDIDATES),
        beta=rng.uniform(50.0, 900.0, CANDIDATES),
        value=rng.uniform(0.5, 3.0, CANDIDATES),
        answer_rows=[int(rows[k]) for k in answer],
        size=size,
        value_weight=1.0,
        context="mobile_evening",
        model_version="nn-test",
        built_ms=1_000,
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("answer", [[], [0, 7, 39], list(range(0, 40, 3))])
def test_a_smaller_pool_is_read_off_the_largest(
    index: ItemIndex, answer: list[int], seed: int
) -> None:
    largest = built(index, CANDIDATES, answer, seed)
    shown = [index.items[10 + k].item_id for k in answer]
    for size in (1, 5, 10, 14, 20, 39, 40, 60):
        expected = built(index, size, answer, seed).item_ids
        assert pool_at_size(largest.item_ids, shown, size) == list(expected)


@pytest.mark.parametrize(
    ("top", "pool", "expected"),
    [
        (["a", "b", "c", "d"], {"a", "c", "x"}, 0.5),
        (["a"], set(), 0.0),
        (["a", "b"], {"a", "b"}, 1.0),
        ([], {"a"}, 1.0),
    ],
)
def test_recall(top: list[str], pool: set[str], expected: float) -> None:
    assert recall(top, pool) == expected


def test_restricted_keeps_the_pools_order(index: ItemIndex) -> None:
    pool = built(index, CANDIDATES, [], 1)
    keep = set(pool.item_ids[::4])
    assert restricted(pool, keep).item_ids == pool.item_ids[::4]


@pytest.mark.parametrize(
    ("ratios", "recalls", "expected"),
    [
        # the smallest within the tolerance of the largest on both figures
        ({100: 0.90, 200: 0.985, 500: 0.99}, {100: 0.5, 200: 0.9, 500: 0.91}, 200),
        # clicks close but recall not yet
        ({100: 0.99, 200: 0.99, 500: 0.99}, {100: 0.5, 200: 0.8, 500: 0.91}, 500),
        ({100: 0.99, 500: 0.98}, {100: 0.9, 500: 0.9}, 100),
    ],
)
def test_recommended_size(
    ratios: dict[int, float], recalls: dict[int, float], expected: int
) -> None:
    assert recommended_size(ratios, recalls, tolerance=0.01) == expected
