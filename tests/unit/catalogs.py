"""Deterministic catalogs for the ranking pipeline's unit tests.

The same geometry as ``origin.catalog.sample`` (an item's vector is its category centre
plus a brand offset plus noise; Zipf-like demand, exponential ages, mostly in stock) but
without a text encoder, so that 30K items take well under a second and do not depend on
which encoder is installed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from origin.catalog.item_index import ItemIndex
from origin.catalog.items import CONTENT_LENGTHS, CONTENT_TYPES, Availability, Item

# (slug, name, relative share, median price)
CATEGORIES = (
    ("electronics", "Electronics", 1.4, 89.0),
    ("books", "Books", 1.1, 16.0),
    ("shoes", "Shoes", 0.8, 75.0),
    ("garden", "Garden", 0.5, 34.0),
    ("beauty", "Beauty", 0.9, 22.0),
    ("furniture", "Furniture", 0.6, 210.0),
    ("grocery", "Grocery", 0.7, 9.0),
    ("toys-games", "Toys & Games", 0.8, 25.0),
    ("computers", "Computers", 0.9, 420.0),
    ("fashion-women", "Women's Fashion", 1.2, 45.0),
    ("fashion-men", "Men's Fashion", 1.0, 49.0),
    ("sports-outdoors", "Sports & Outdoors", 0.9, 55.0),
)
BRANDS_PER_CATEGORY = 5
STATES = (Availability.IN_STOCK, Availability.LIMITED, Availability.OUT_OF_STOCK)


@dataclass(frozen=True)
class Catalog:
    items: list[Item]
    vectors: npt.NDArray[np.float32]  # (n, dim), unit rows

    def index(self) -> ItemIndex:
        return ItemIndex(self.items, self.vectors)


def make_catalog(size: int, seed: int, dim: int) -> Catalog:
    rng = np.random.default_rng(seed)
    shares = np.array([c[2] for c in CATEGORIES])
    category = rng.choice(len(CATEGORIES), size=size, p=shares / shares.sum())
    brand = rng.integers(0, BRANDS_PER_CATEGORY, size=size)
    centres = rng.standard_normal((len(CATEGORIES), dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    offsets = rng.standard_normal((len(CATEGORIES), BRANDS_PER_CATEGORY, dim))
    offsets *= 0.55 / np.linalg.norm(offsets, axis=2, keepdims=True)
    noise = rng.standard_normal((size, dim)) * (0.7 / np.sqrt(dim))
    latent = centres[category] + offsets[category, brand] + noise
    vectors = (latent / np.linalg.norm(latent, axis=1, keepdims=True)).astype(np.float32)

    medians = np.array([c[3] for c in CATEGORIES])[category]
    prices = np.floor(np.clip(medians * np.exp(0.8 * rng.standard_normal(size)), 1, 20_000)) - 0.01
    ranks = rng.permutation(size) + 1
    popularity = 1.0 - np.log(ranks) / np.log(size + 1)
    freshness = np.exp(-np.minimum(rng.exponential(180.0, size=size), 730.0) / 90.0)
    availability = rng.choice(3, size=size, p=[0.85, 0.10, 0.05])
    kind = rng.integers(0, len(CONTENT_TYPES), size=size)
    length = rng.integers(0, len(CONTENT_LENGTHS), size=size)
    items = [
        Item(
            item_id=f"it-{row:06d}",
            title=f"Item {row}",
            category=CATEGORIES[category[row]][0],
            category_name=CATEGORIES[category[row]][1],
            brand=f"brand-{brand[row]}",
            price=round(float(prices[row]), 2),
            availability=STATES[availability[row]],
            popularity=round(float(popularity[row]), 6),
            freshness=round(float(freshness[row]), 6),
            created_at=0,
            image_url="",
            modalities=("text",),
            catalog="test",
            content_type=CONTENT_TYPES[kind[row]],
            content_length=CONTENT_LENGTHS[length[row]],
        )
        for row in range(size)
    ]
    return Catalog(items, vectors)
