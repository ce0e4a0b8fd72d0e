from __future__ import annotations

import numpy as np
import pytest

from origin.catalog.item_index import Filters, ItemIndex
from origin.catalog.items import Availability, Item


def make_item(n: int, category: str, price: float, availability: Availability, pop: float) -> Item:
    return Item(
        item_id=f"it-{n}",
        title=f"Item {n}",
        category=category,
        category_name=category.title(),
        brand="B",
        price=price,
        availability=availability,
        popularity=pop,
        freshness=0.0,
        created_at=0,
        image_url="u",
        modalities=("text",),
        catalog="c",
    )


@pytest.fixture
def index() -> ItemIndex:
    items = [
        make_item(0, "books", 10.0, Availability.IN_STOCK, 0.9),
        make_item(1, "books", 30.0, Availability.LIMITED, 0.5),
        make_item(2, "toys", 20.0, Availability.IN_STOCK, 0.7),
        make_item(3, "toys", 99.0, Availability.OUT_OF_STOCK, 1.0),
        make_item(4, "garden", 5.0, Availability.IN_STOCK, 0.1),
    ]
    vectors = np.eye(5, 4, dtype=np.float32) * 2  # item 4 has a zero vector
    return ItemIndex(items, vectors)


def ids(index: ItemIndex, rows: np.ndarray) -> list[str]:
    return [index.items[int(r)].item_id for r in rows]


@pytest.mark.parametrize(
    ("filters", "allowed"),
    [
        (Filters(), ["it-0", "it-1", "it-2", "it-4"]),  # out of stock hidden by default
        (Filters(include_out_of_stock=True), ["it-0", "it-1", "it-2", "it-3", "it-4"]),
        (Filters(categories=frozenset({"books"})), ["it-0", "it-1"]),
        (Filters(categories=frozenset({"nope"})), []),
        (Filters(price_min=10.0, price_max=20.0), ["it-0", "it-2"]),
        (Filters(exclude=frozenset({"it-0", "unknown"})), ["it-1", "it-2", "it-4"]),
    ],
)
def test_mask(index: ItemIndex, filters: Filters, allowed: list[str]) -> None:
    assert ids(index, np.flatnonzero(index.mask(filters))) == allowed


def test_nearest_is_exact_and_respects_the_mask(index: ItemIndex) -> None:
    query = np.array([0.1, 0.2, 1.0, 0.0], dtype=np.float32)
    rows, sims = index.nearest(query, 2, index.mask(Filters()))
    assert ids(index, rows) == ["it-2", "it-1"]
    assert sims[0] > sims[1]
    rows, _ = index.nearest(query, 10, index.mask(Filters(exclude=frozenset({"it-2"}))))
    assert ids(index, rows)[0] == "it-1"
    assert len(rows) == 3


def test_nearest_matches_brute_force_on_random_data() -> None:
    rng = np.random.default_rng(0)
    items = [make_item(n, "c", 1.0, Availability.IN_STOCK, 0.5) for n in range(500)]
    vectors = rng.standard_normal((500, 16)).astype(np.float32)
    index = ItemIndex(items, vectors)
    query = rng.standard_normal(16).astype(np.float32)
    rows, _ = index.nearest(query, 25, index.mask(Filters()))
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    assert list(rows) == list(np.argsort(-(unit @ query))[:25])


def test_nearest_rejects_a_query_of_another_dimension(index: ItemIndex) -> None:
    with pytest.raises(ValueError, match="dimension"):
        index.nearest(np.zeros(3, dtype=np.float32), 1, index.mask(Filters()))


def test_popular_follows_the_trending_order(index: ItemIndex) -> None:
    assert ids(index, index.popular(3, index.mask(Filters()))) == ["it-0", "it-2", "it-1"]
    assert ids(index, index.popular(0, index.mask(Filters()))) == []


def test_an_empty_catalog_answers_no_rows() -> None:
    index = ItemIndex.from_batches([], 4)
    assert (len(index), index.dim) == (0, 4)
    for filters in (Filters(), Filters(include_out_of_stock=True), Filters(price_min=1.0)):
        mask = index.mask(filters)
        assert mask.dtype == np.bool_  # not float: `mask &= ...` would fail
        assert ids(index, index.popular(5, mask)) == []
        assert ids(index, index.fresh(5, mask)) == []
        rows, sims = index.nearest(np.ones(4, dtype=np.float32), 5, mask)
        assert (rows.size, sims.size) == (0, 0)


def test_items_added_to_an_empty_catalog_are_served() -> None:
    index = ItemIndex.empty(4)
    item = make_item(7, "books", 10.0, Availability.IN_STOCK, 0.5)
    grown = index.upserted([item], np.ones((1, 4), dtype=np.float32))
    assert ids(grown, grown.popular(5, grown.mask(Filters()))) == ["it-7"]
    assert len(index) == 0


@pytest.mark.parametrize(
    ("removed", "left"),
    [
        (["it-1"], ["it-0", "it-2", "it-4"]),
        (["it-0", "it-2", "unknown"], ["it-1", "it-4"]),
        (["unknown"], ["it-0", "it-1", "it-2", "it-4"]),
        (["it-0", "it-1", "it-2", "it-3", "it-4"], []),
    ],
)
def test_without_drops_the_items_and_keeps_the_rest(
    index: ItemIndex, removed: list[str], left: list[str]
) -> None:
    smaller = index.without(removed)
    in_stock = smaller.mask(Filters())
    assert sorted(ids(smaller, smaller.popular(10, in_stock))) == left
    for item_id in left:
        row = smaller.row_of[item_id]
        assert np.allclose(smaller.vectors[row], index.vectors[index.row_of[item_id]])
    assert "it-1" in index.row_of  # the old index is untouched
