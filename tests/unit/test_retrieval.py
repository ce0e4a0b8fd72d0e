from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from origin.catalog import Availability
from origin.item_index import Filters, ItemIndex
from origin.retrieval import Candidates, Source, retrieve
from tests.unit.catalogs import make_catalog

Vector = npt.NDArray[np.float32]


@pytest.fixture(scope="module")
def index() -> ItemIndex:
    return make_catalog(2_000, 9, 16).index()


def user_vector(index: ItemIndex) -> Vector:
    return index.vectors[3].copy()


def session_vector(index: ItemIndex) -> Vector:
    mean = index.vectors[[100, 101]].mean(axis=0)
    unit: Vector = (mean / np.linalg.norm(mean)).astype(np.float32)
    return unit


KINDS = {
    # user kind: (has user vector, has session vector)
    "cold": (False, False),
    "sparse": (False, True),
    "known-no-session": (True, False),
    "known": (True, True),
}


def run(
    index: ItemIndex, kind: str, budget: int = 200, filters: Filters | None = None
) -> Candidates:
    has_user, has_session = KINDS[kind]
    return retrieve(
        index,
        index.mask(filters or Filters()),
        budget,
        user_vector=user_vector(index) if has_user else None,
        session_vector=session_vector(index) if has_session else None,
    )


@pytest.mark.parametrize(
    ("kind", "allowed", "first"),
    [
        ("cold", {Source.TRENDING, Source.FRESH}, Source.TRENDING),
        ("sparse", {Source.CONTENT, Source.TRENDING, Source.FRESH}, Source.CONTENT),
        ("known-no-session", {Source.COLLABORATIVE, Source.TRENDING, Source.FRESH},
         Source.COLLABORATIVE),
        ("known", {Source.COLLABORATIVE, Source.CONTENT, Source.TRENDING, Source.FRESH},
         Source.COLLABORATIVE),
    ],
    ids=list(KINDS),
)  # fmt: skip
def test_sources_by_user_kind(
    index: ItemIndex, kind: str, allowed: set[Source], first: Source
) -> None:
    c = run(index, kind)
    sources = {Source(int(s)) for s in c.source}
    assert sources <= allowed
    assert Source.TRENDING in sources
    # sources are merged in order: the first source's items lead
    assert Source(int(c.source[0])) == first
    assert list(c.source) == sorted(c.source)


def test_known_user_gets_collaborative_first_and_most(index: ItemIndex) -> None:
    c = run(index, "known")
    counts = np.bincount(c.source, minlength=4)
    assert counts[Source.COLLABORATIVE] == counts.max()
    # the collaborative rows are the user's nearest items, best first
    collaborative = c.rows[c.source == Source.COLLABORATIVE]
    exact, _ = index.nearest(user_vector(index), collaborative.size, index.mask(Filters()))
    assert collaborative.tolist() == exact.tolist()


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("budget", [1, 7, 50, 200, 500])
def test_budget_and_no_duplicates(index: ItemIndex, kind: str, budget: int) -> None:
    c = run(index, kind, budget)
    assert 0 < len(c) <= budget
    assert np.unique(c.rows).size == c.rows.size
    assert c.rows.size == c.source.size == c.base.size == c.similarity.size
    assert ((c.base >= 0) & (c.base <= 1)).all()
    assert ((c.similarity >= 0) & (c.similarity <= 1)).all()


def test_zero_budget_is_empty(index: ItemIndex) -> None:
    c = run(index, "known", 0)
    assert len(c) == 0


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(
    "filters",
    [
        Filters(categories=frozenset({"books"})),
        Filters(categories=frozenset({"books", "shoes"}), price_max=60.0),
        Filters(price_min=50.0, price_max=150.0),
        Filters(exclude=frozenset({"it-000003", "it-000100", "it-000101"})),
        Filters(include_out_of_stock=True),
        Filters(categories=frozenset({"garden"}), price_min=1000.0),  # nothing allowed
    ],
    ids=["category", "categories-and-price", "price-range", "exclude", "out-of-stock-ok", "none"],
)
def test_filters_are_honoured(index: ItemIndex, kind: str, filters: Filters) -> None:
    c = run(index, kind, 100, filters)
    allowed = index.mask(filters)
    assert allowed[c.rows].all()
    for row in c.rows:
        item = index.items[int(row)]
        if filters.categories is not None:
            assert item.category in filters.categories
        if filters.price_min is not None:
            assert item.price >= filters.price_min
        if filters.price_max is not None:
            assert item.price <= filters.price_max
        assert item.item_id not in filters.exclude
        if not filters.include_out_of_stock:
            assert item.availability != Availability.OUT_OF_STOCK
    if not allowed.any():
        assert len(c) == 0


def test_default_filters_hide_out_of_stock(index: ItemIndex) -> None:
    for kind in KINDS:
        c = run(index, kind, 500)
        assert index.in_stock[c.rows].all()


@pytest.mark.parametrize(
    ("kind", "expect_similarity"),
    [("cold", False), ("sparse", True), ("known-no-session", True), ("known", True)],
    ids=list(KINDS),
)
def test_base_score(index: ItemIndex, kind: str, expect_similarity: bool) -> None:
    c = run(index, kind)
    if not expect_similarity:
        assert c.similarity.tolist() == [0.5] * len(c)
        assert np.allclose(c.base, index.trending[c.rows])
    else:
        has_user, _ = KINDS[kind]
        reference = user_vector(index) if has_user else session_vector(index)
        sims = (index.vectors[c.rows] @ reference + 1) / 2
        assert np.allclose(c.similarity, sims, atol=1e-6)
        assert np.allclose(c.base, 0.85 * sims + 0.15 * index.popularity[c.rows], atol=1e-6)


def test_cold_users_get_trending_then_fresh(index: ItemIndex) -> None:
    c = run(index, "cold", 100)
    trending = c.rows[c.source == Source.TRENDING]
    assert trending.tolist() == index.popular(trending.size, index.mask(Filters())).tolist()
    fresh = c.rows[c.source == Source.FRESH]
    assert fresh.size > 0
    assert np.all(np.diff(index.freshness[fresh]) <= 0)
