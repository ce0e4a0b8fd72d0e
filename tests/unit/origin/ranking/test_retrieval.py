"""Candidate retrieval: which sources a request's inputs allow, their shares of the budget,
the merge (in source order, duplicates dropped) and the request's filters."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from origin.catalog.item_index import Filters, ItemIndex
from origin.catalog.items import Availability
from origin.ranking.retrieval import SHARES, Candidates, Source, retrieve, shares_for
from tests.unit.catalogs import make_catalog

Vector = npt.NDArray[np.float32]
# The merge order: the first source to find an item keeps it.
ORDER = list(SHARES)
# Rows of the best items by engagement, best first (some are out of stock).
LEARNED = tuple(range(1_999, 1_700, -3))


@pytest.fixture(scope="module")
def index() -> ItemIndex:
    return make_catalog(2_000, 9, 16).index()


def user_vector(index: ItemIndex) -> Vector:
    vector: Vector = index.vectors[3].copy()
    return vector


def session_vector(index: ItemIndex) -> Vector:
    mean = index.vectors[[100, 101]].mean(axis=0)
    unit: Vector = (mean / np.linalg.norm(mean)).astype(np.float32)
    return unit


KINDS = {
    # user kind: (has a user model, has a session)
    "cold": (False, False),
    "sparse": (False, True),
    "known-no-session": (True, False),
    "known": (True, True),
}


def run(
    index: ItemIndex,
    kind: str,
    budget: int = 200,
    filters: Filters | None = None,
    *,
    learned: tuple[int, ...] = LEARNED,
    seed: int = 0,
) -> Candidates:
    has_user, has_session = KINDS[kind]
    return retrieve(
        index,
        index.mask(filters or Filters()),
        budget,
        np.random.default_rng(seed),
        user_vector=user_vector(index) if has_user else None,
        session_vector=session_vector(index) if has_session else None,
        learned=learned,
    )


def sources(c: Candidates) -> list[Source]:
    return [Source(int(s)) for s in c.source]


# --- shares ------------------------------------------------------------------------------


@pytest.mark.parametrize("learned", [False, True], ids=["no-learned", "learned"])
@pytest.mark.parametrize("session", [False, True], ids=["no-session", "session"])
@pytest.mark.parametrize("user", [False, True], ids=["no-user", "user"])
def test_shares_for_the_inputs_a_request_has(user: bool, session: bool, learned: bool) -> None:
    shares = shares_for(user=user, session=session, learned=learned)
    expected = {Source.TRENDING, Source.FRESH, Source.RANDOM}
    expected |= {Source.COLLABORATIVE} if user else set()
    expected |= {Source.CONTENT} if session else set()
    expected |= {Source.LEARNED} if learned else set()
    assert set(shares) == expected
    assert list(shares) == [s for s in ORDER if s in expected]
    assert sum(shares.values()) == pytest.approx(1.0)
    # what a missing input would have had is spread in proportion over the others
    for a in shares:
        for b in shares:
            assert shares[a] / shares[b] == pytest.approx(SHARES[a] / SHARES[b])


def test_the_shares_sum_to_one() -> None:
    assert sum(SHARES.values()) == pytest.approx(1.0)
    assert set(SHARES) == set(Source)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("learned", [(), LEARNED], ids=["no-learned", "learned"])
def test_each_source_takes_about_its_share(
    index: ItemIndex, kind: str, learned: tuple[int, ...]
) -> None:
    budget = 400
    c = run(index, kind, budget, learned=learned)
    has_user, has_session = KINDS[kind]
    shares = shares_for(user=has_user, session=has_session, learned=bool(learned))
    counts = dict(zip(*np.unique(c.source, return_counts=True), strict=True))
    assert {Source(int(s)) for s in counts} <= set(shares)
    for source, share in shares.items():
        k = round(budget * share)
        found = int(counts.get(source, 0))
        # never more than its share; less only where an earlier source had the item already,
        # the random draw repeated itself, or the learned rank is short
        assert found <= k
        if source in (Source.COLLABORATIVE, Source.TRENDING):
            assert found >= k // 2, source


# --- the merge ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "first"),
    [
        ("cold", Source.LEARNED),
        ("sparse", Source.CONTENT),
        ("known-no-session", Source.COLLABORATIVE),
        ("known", Source.COLLABORATIVE),
    ],
    ids=list(KINDS),
)
def test_sources_are_merged_in_order(index: ItemIndex, kind: str, first: Source) -> None:
    c = run(index, kind)
    found = sources(c)
    assert found[0] == first
    positions = [ORDER.index(s) for s in found]
    assert positions == sorted(positions)
    assert {Source.TRENDING, Source.RANDOM} <= set(found)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("budget", [5, 7, 50, 200, 500])
def test_budget_and_no_duplicates(index: ItemIndex, kind: str, budget: int) -> None:
    c = run(index, kind, budget)
    assert 0 < len(c) <= budget
    assert np.unique(c.rows).size == c.rows.size
    assert c.rows.shape == c.source.shape
    assert c.rows.dtype == np.intp
    assert c.source.dtype == np.int8


def test_nothing_asked_nothing_found(index: ItemIndex) -> None:
    assert len(run(index, "known", 0)) == 0


def test_an_item_found_twice_keeps_its_first_source(index: ItemIndex) -> None:
    # the user's nearest items are also the best learned ones: collaborative keeps them
    nearest, _ = index.nearest(user_vector(index), 20, index.mask(Filters()))
    c = run(index, "known-no-session", 100, learned=tuple(int(r) for r in nearest))
    by_row = dict(zip(c.rows.tolist(), sources(c), strict=True))
    assert all(by_row[int(r)] == Source.COLLABORATIVE for r in nearest)
    assert Source.LEARNED not in by_row.values()


def test_same_seed_same_candidates(index: ItemIndex) -> None:
    a, b = run(index, "known", seed=4), run(index, "known", seed=4)
    assert np.array_equal(a.rows, b.rows)
    assert np.array_equal(a.source, b.source)


# --- the sources -------------------------------------------------------------------------


def test_collaborative_rows_are_the_users_nearest(index: ItemIndex) -> None:
    c = run(index, "known")
    collaborative = c.rows[c.source == Source.COLLABORATIVE]
    exact, _ = index.nearest(user_vector(index), collaborative.size, index.mask(Filters()))
    assert collaborative.tolist() == exact.tolist()


def test_content_rows_are_the_sessions_nearest(index: ItemIndex) -> None:
    c = run(index, "sparse")
    content = c.rows[c.source == Source.CONTENT]
    assert content.size > 0
    exact, _ = index.nearest(session_vector(index), content.size, index.mask(Filters()))
    assert content.tolist() == exact.tolist()


def test_learned_rows_are_the_best_allowed_first(index: ItemIndex) -> None:
    mask = index.mask(Filters())
    c = run(index, "cold", 200)
    learned = c.rows[c.source == Source.LEARNED].tolist()
    allowed = [r for r in LEARNED if mask[r]]
    assert len(allowed) < len(LEARNED)  # some are out of stock: skipped
    assert learned == allowed[: len(learned)]
    assert learned  # the learned source is used when given


def test_without_a_learned_rank_its_share_goes_to_the_others(index: ItemIndex) -> None:
    with_learned = run(index, "cold", 200)
    without = run(index, "cold", 200, learned=())
    assert Source.LEARNED not in sources(without)
    trending_with = int(np.count_nonzero(with_learned.source == Source.TRENDING))
    trending_without = int(np.count_nonzero(without.source == Source.TRENDING))
    assert trending_without > trending_with
    # a learned rank with nothing allowed in it counts as none
    out_of_stock = tuple(int(r) for r in np.flatnonzero(~index.in_stock)[:20])
    assert Source.LEARNED not in sources(run(index, "cold", 200, learned=out_of_stock))


def test_cold_users_get_trending_then_fresh(index: ItemIndex) -> None:
    c = run(index, "cold", 100, learned=())
    trending = c.rows[c.source == Source.TRENDING]
    assert trending.tolist() == index.popular(trending.size, index.mask(Filters())).tolist()
    fresh = c.rows[c.source == Source.FRESH]
    assert fresh.size > 0
    assert np.all(np.diff(index.freshness[fresh]) <= 0)


def test_the_random_source_reaches_beyond_the_other_sources(index: ItemIndex) -> None:
    c = run(index, "known", 200)
    picks = c.rows[c.source == Source.RANDOM]
    assert picks.size > 0
    # allowed, and not what the demand-driven sources would have found
    assert index.mask(Filters())[picks].all()
    popular = set(index.popular(500, index.mask(Filters())).tolist())
    assert len(set(picks.tolist()) - popular) > picks.size // 2
    # a different generator, different picks; the other sources stay the same
    other = run(index, "known", 200, seed=1)
    assert set(other.rows[other.source == Source.RANDOM].tolist()) != set(picks.tolist())
    for source in (Source.COLLABORATIVE, Source.CONTENT, Source.LEARNED, Source.TRENDING):
        assert np.array_equal(c.rows[c.source == source], other.rows[other.source == source])


# --- filters -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(
    "filters",
    [
        Filters(categories=frozenset({"books"})),
        Filters(categories=frozenset({"books", "shoes"}), price_max=60.0),
        Filters(price_min=50.0, price_max=150.0),
        Filters(exclude=frozenset({"it-000003", "it-000100", "it-000101", "it-001999"})),
        Filters(include_out_of_stock=True),
        Filters(categories=frozenset({"garden"}), price_min=1000.0),  # nothing allowed
    ],
    ids=["category", "categories-and-price", "price-range", "exclude", "out-of-stock-ok", "none"],
)
def test_filters_are_honoured_by_every_source(
    index: ItemIndex, kind: str, filters: Filters
) -> None:
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


def test_a_narrow_filter_is_found_whole(index: ItemIndex) -> None:
    filters = Filters(categories=frozenset({"garden"}), price_max=20.0)
    allowed = np.flatnonzero(index.mask(filters))
    assert 0 < allowed.size < 50
    for kind in KINDS:
        c = run(index, kind, 300, filters)
        assert sorted(c.rows.tolist()) == allowed.tolist()
