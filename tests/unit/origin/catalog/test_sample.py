from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from origin.catalog.fusion import FusionWeights, fuse
from origin.catalog.item_vectors import ItemVectors
from origin.catalog.items import (
    CONTENT_LENGTHS,
    CONTENT_TYPES,
    Availability,
    from_payload,
    point_id,
    to_payload,
)
from origin.catalog.sample import CATEGORIES, fingerprint, generate, item_id_of
from origin.catalog.text_encoder import minilm_available


def hashing(dim: int) -> ItemVectors:
    """Fast vectors for tests about everything but the text model."""
    return ItemVectors.default(dim, "hashing")


def test_same_inputs_same_catalog() -> None:
    vectors = hashing(16)
    a, b = generate(300, seed=11, dim=16, vectors=vectors), generate(300, 11, 16, vectors)
    assert a.items == b.items
    assert np.array_equal(a.unified, b.unified)
    assert a.fingerprint == b.fingerprint == fingerprint(300, 11, 16, vectors.build_id)


@pytest.mark.parametrize(
    "change",
    [
        {"size": 301},
        {"seed": 12},
        {"dim": 32},
        {"vectors": "all-MiniLM-L6-v2-int8+fusion-71c66f38e61cd5bf"},
        {"vectors": "hashing-v1-512+fusion-0000000000000000"},
    ],
)
def test_other_inputs_other_fingerprint(change: dict[str, object]) -> None:
    base: dict[str, object] = {"size": 300, "seed": 11, "dim": 16, "vectors": "hashing-v1-512+f"}
    assert fingerprint(**{**base, **change}) != fingerprint(**base)  # type: ignore[arg-type]


def test_the_fusion_weights_are_part_of_the_fingerprint() -> None:
    default = hashing(16)
    other = FusionWeights.from_arrays(
        {**default.fusion.arrays(), "gate_b": np.zeros(16, np.float32)}, digest="other"
    )
    assert ItemVectors(default.encoder, other).build_id != default.build_id


def test_shape_and_units() -> None:
    vectors = hashing(24)
    catalog = generate(1000, seed=1, dim=24, vectors=vectors)
    for matrix, dim in ((catalog.text, 512), (catalog.image, 24), (catalog.unified, 24)):
        assert matrix.shape == (1000, dim)
        assert matrix.dtype == np.float32
        assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    assert len({i.item_id for i in catalog.items}) == 1000


def test_unified_vectors_are_algorithm_3_over_text_and_image() -> None:
    vectors = hashing(24)
    catalog = generate(200, seed=1, dim=24, vectors=vectors)
    expected = fuse(vectors.fusion, {"text": catalog.text, "image": catalog.image})
    assert np.allclose(catalog.unified, expected, atol=1e-6)
    assert {i.modalities for i in catalog.items} == {("text", "image")}


@pytest.mark.skipif(not minilm_available(), reason="the MiniLM text model is not installed")
def test_with_the_text_model_text_vectors_have_its_dimension() -> None:
    catalog = generate(50, seed=1, dim=24)
    assert catalog.text.shape == (50, 384)
    assert catalog.unified.shape == (50, 24)
    # One family ("Brand Adjective Noun"), one text vector: the model number means nothing.
    by_family: dict[str, int] = {}
    for row, item in enumerate(catalog.items):
        first = by_family.setdefault(item.title.rsplit(" ", 1)[0], row)
        assert np.array_equal(catalog.text[row], catalog.text[first])


@pytest.mark.parametrize(
    ("category", "noun", "content_type", "content_length"),
    [
        ("books", "Novel", "media", "long"),
        ("video-games", "Console Game", "media", "long"),
        ("video-games", "Gift Card", "digital", "short"),
        ("grocery", "Olive Oil", "consumable", "short"),
        ("beauty", "Serum", "consumable", "short"),
        ("fashion-women", "Dress", "apparel", "medium"),
        ("shoes", "Boots", "apparel", "medium"),
        ("electronics", "Headphones", "physical", "medium"),
        ("furniture", "Sofa", "physical", "long"),
    ],
)
def test_content_type_and_length_follow_the_category(
    category: str, noun: str, content_type: str, content_length: str
) -> None:
    catalog = generate(3000, seed=4, dim=16, vectors=hashing(16))
    kinds = {
        (i.content_type, i.content_length)
        for i in catalog.items
        if i.category == category and i.title.rsplit(" ", 1)[0].endswith(noun)
    }
    assert kinds == {(content_type, content_length)}


def test_every_content_kind_is_a_known_one() -> None:
    catalog = generate(3000, seed=4, dim=16, vectors=hashing(16))
    assert {i.content_type for i in catalog.items} == set(CONTENT_TYPES)
    assert {i.content_length for i in catalog.items} == set(CONTENT_LENGTHS)


def test_realistic_metadata() -> None:
    catalog = generate(5000, seed=2, dim=16, vectors=hashing(16))
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


@pytest.mark.parametrize(
    ("encoder", "same_min", "gap_min"),
    [
        ("hashing", 0.15, 0.15),
        pytest.param(
            "minilm",
            0.3,
            0.2,
            marks=pytest.mark.skipif(not minilm_available(), reason="no MiniLM"),
        ),
    ],
)
def test_vectors_carry_category_structure(encoder: str, same_min: float, gap_min: float) -> None:
    vectors = ItemVectors.default(64, "minilm" if encoder == "minilm" else "hashing")
    catalog = generate(1500, seed=3, dim=64, vectors=vectors)
    cats = np.array([i.category for i in catalog.items])
    sims = catalog.unified @ catalog.unified.T
    same = cats[:, None] == cats[None, :]
    np.fill_diagonal(same, False)
    different = cats[:, None] != cats[None, :]
    assert sims[same].mean() > same_min
    assert sims[same].mean() - sims[different].mean() > gap_min


def test_payload_round_trip() -> None:
    item = generate(10, seed=1, dim=8, vectors=hashing(8)).items[3]
    assert from_payload(to_payload(item)) == item


def test_point_ids_are_stable_uuids() -> None:
    assert point_id("it-000001") == point_id("it-000001")
    assert point_id("it-000001") != point_id("it-000002")
    assert len(point_id("x")) == 36


@pytest.mark.parametrize(("size", "dim"), [(0, 16), (10, 4)])
def test_bad_sizes_are_rejected(size: int, dim: int) -> None:
    with pytest.raises(ValueError, match=">="):
        generate(size, seed=1, dim=dim, vectors=hashing(16))


@pytest.mark.parametrize(
    ("row", "size", "item_id"),
    [(0, 10, "it-000000"), (42, 100_000, "it-000042"), (999_999, 1_000_000, "it-999999")],
)
def test_item_ids(row: int, size: int, item_id: str) -> None:
    assert item_id_of(row, size) == item_id
    assert generate(3, seed=1, dim=8, vectors=hashing(8)).items[2].item_id == item_id_of(2, 3)
