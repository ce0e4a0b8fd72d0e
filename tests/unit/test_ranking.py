from __future__ import annotations

import numpy as np

from origin.item_index import Filters, ItemIndex
from origin.ranking import rank_cold, rank_known
from origin.sample_catalog import generate


def catalog_index(size: int = 400) -> ItemIndex:
    catalog = generate(size, seed=5, dim=32)
    return ItemIndex(catalog.items, catalog.unified)


def test_cold_users_get_trending_items() -> None:
    index = catalog_index()
    ranked = rank_cold(index, Filters(), 10)
    assert [r.source for r in ranked] == ["trending"] * 10
    scores = [r.score for r in ranked]
    assert scores == sorted(scores, reverse=True)


def test_known_users_get_items_near_their_embedding() -> None:
    index = catalog_index()
    anchor = next(row for row in range(len(index)) if index.in_stock[row])
    ranked = rank_known(index, index.vectors[anchor], Filters(), 10)
    assert all(r.source == "content" for r in ranked)
    assert ranked[0].row == anchor
    sims = index.vectors[[r.row for r in ranked]] @ index.vectors[anchor]
    assert float(sims.mean()) > 0.4  # same neighbourhood, not random items


def test_filters_apply_to_known_users() -> None:
    index = catalog_index()
    category = index.items[0].category
    ranked = rank_known(
        index, index.vectors[0], Filters(categories=frozenset({category}), price_max=50.0), 10
    )
    for r in ranked:
        item = index.items[r.row]
        assert item.category == category
        assert item.price <= 50.0


def test_asking_for_more_than_exists_returns_everything_allowed_once() -> None:
    index = catalog_index(50)
    ranked = rank_known(index, index.vectors[0], Filters(), count=60)
    allowed = np.flatnonzero(index.mask(Filters()))
    assert sorted(r.row for r in ranked) == sorted(int(r) for r in allowed)
