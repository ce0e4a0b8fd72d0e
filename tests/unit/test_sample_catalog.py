from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from origin.catalog import Availability, from_payload, point_id, to_payload
from origin.sample_catalog import CATEGORIES, fingerprint, generate, item_id_of


def test_same_inputs_same_catalog() -> None:
    a, b = generate(300, seed=11, dim=16), generate(300, seed=11, dim=16)
    assert a.items == b.items
    assert np.array_equal(a.unified, b.unified)
    assert a.fingerprint == b.fingerprint == fingerprint(300, 11, 16)


@pytest.mark.parametrize("change", [{"size": 301}, {"seed": 12}, {"dim": 32}])
def test_other_inputs_other_fingerprint(change: dict[str, int]) -> None:
    params = {"size": 300, "seed": 11, "dim": 16, **change}
    assert fingerprint(**params) != fingerprint(300, 11, 16)


def test_shape_and_units() -> None:
    catalog = generate(1000, seed=1, dim=24)
    for matrix in (catalog.text, catalog.image, catalog.unified):
        assert matrix.shape == (1000, 24)
        assert matrix.dtype == np.float32
        assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    assert len({i.item_id for i in catalog.items}) == 1000


def test_realistic_metadata() -> None:
    catalog = generate(5000, seed=2, dim=16)
    categories = Counter(i.category for i in catalog.items)
    assert set(categories) == {c.slug for c in CATEGORIES}
    availability = Counter(i.availability for i in catalog.items)
    assert 0.80 < availability[Availability.IN_STOCK] / 5000 < 0.90
    assert 0.02 < availability[Availability.OUT_OF_STOCK] / 5000 < 0.08
    prices = [i.price for i in catalog.items]
    assert min(prices) >= 0.99
    assert all(f"{p:.2f}".endswith("9") for p in prices)  # shop prices
    assert all(0 <= i.popularity <= 1 and 0 <= i.freshness <= 1 for i in catalog.items)
    books = [i for i in catalog.items if i.category == "books"]
    assert books[0].title.split()[-2] in (*CATEGORIES[11].nouns, "Press", "Books", "House")


def test_vectors_carry_category_structure() -> None:
    catalog = generate(2000, seed=3, dim=64)
    cats = np.array([i.category for i in catalog.items])
    sims = catalog.unified @ catalog.unified.T
    same = cats[:, None] == cats[None, :]
    np.fill_diagonal(same, False)
    different = cats[:, None] != cats[None, :]
    assert sims[same].mean() > 0.35
    assert abs(sims[different].mean()) < 0.05


def test_payload_round_trip() -> None:
    item = generate(10, seed=1, dim=8).items[3]
    assert from_payload(to_payload(item)) == item


def test_point_ids_are_stable_uuids() -> None:
    assert point_id("it-000001") == point_id("it-000001")
    assert point_id("it-000001") != point_id("it-000002")
    assert len(point_id("x")) == 36


@pytest.mark.parametrize(("size", "dim"), [(0, 16), (10, 4)])
def test_bad_sizes_are_rejected(size: int, dim: int) -> None:
    with pytest.raises(ValueError, match=">="):
        generate(size, seed=1, dim=dim)


@pytest.mark.parametrize(
    ("row", "size", "item_id"),
    [(0, 10, "it-000000"), (42, 100_000, "it-000042"), (999_999, 1_000_000, "it-999999")],
)
def test_item_ids(row: int, size: int, item_id: str) -> None:
    assert item_id_of(row, size) == item_id
    assert generate(3, seed=1, dim=8).items[2].item_id == item_id_of(2, 3)
