"""A deterministic, realistic sample catalog: the same (size, seed, dim) gives the same items.

Items belong to categories with their own brands, product nouns and price levels. Vectors
are built so that the geometry means something: an item's latent point is its category
centre plus a brand offset, a price-tier direction and noise; the text and image vectors
are two noisy views of that point, and the unified vector fuses them (weighted average,
the first step of Algorithm 3; the full fusion is the catalog-fusion issue's). Demand is
Zipf-like, availability mostly in stock, ages exponential over two years.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

from origin.catalog import Availability, Item

GENERATOR_VERSION = 1

# Ages and freshness are relative to this instant, so the catalog does not depend on "now".
AS_OF = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp())

TEXT_WEIGHT = 0.6
IMAGE_WEIGHT = 0.4


@dataclass(frozen=True)
class CategorySpec:
    slug: str
    name: str
    share: float  # relative number of items
    price_median: float
    price_sigma: float  # of log(price)
    nouns: tuple[str, ...]
    brands: tuple[str, ...]


CATEGORIES: tuple[CategorySpec, ...] = (
    CategorySpec("electronics", "Electronics", 1.4, 89.0, 0.9,
                 ("Headphones", "Speaker", "Soundbar", "Earbuds", "Smartwatch", "Camera"),
                 ("Voltaic", "Nimbus", "Arcwave", "Helix", "Quanta", "Sonora")),
    CategorySpec("computers", "Computers", 0.9, 420.0, 0.8,
                 ("Laptop", "Monitor", "Keyboard", "Mouse", "Docking Station", "SSD"),
                 ("Quanta", "Bytecraft", "Lumen", "Northgate", "Corvid")),
    CategorySpec("phones", "Phones & Accessories", 0.8, 35.0, 1.1,
                 ("Smartphone", "Phone Case", "Charger", "Power Bank", "Screen Protector"),
                 ("Arcwave", "Pocketry", "Helix", "Ampere")),
    CategorySpec("home-kitchen", "Home & Kitchen", 1.3, 39.0, 0.8,
                 ("Blender", "Coffee Maker", "Knife Set", "Cookware Set", "Toaster", "Kettle"),
                 ("Hearthly", "Copperleaf", "Maison Vert", "Kitchmate", "Ovenbird")),
    CategorySpec("furniture", "Furniture", 0.6, 210.0, 0.7,
                 ("Sofa", "Desk", "Bookshelf", "Armchair", "Dining Table", "Bed Frame"),
                 ("Oakhaven", "Nordlys", "Loftline", "Timberwell")),
    CategorySpec("fashion-women", "Women's Fashion", 1.2, 45.0, 0.7,
                 ("Dress", "Blouse", "Jeans", "Coat", "Cardigan", "Skirt"),
                 ("Aurelle", "Mira Rose", "Linden & Co", "Solene", "Verity")),
    CategorySpec("fashion-men", "Men's Fashion", 1.0, 49.0, 0.7,
                 ("Shirt", "Chinos", "Jacket", "Sweater", "Polo", "Blazer"),
                 ("Harrow", "Linden & Co", "Marlowe", "Steadfast")),
    CategorySpec("shoes", "Shoes", 0.8, 75.0, 0.6,
                 ("Running Shoes", "Sneakers", "Boots", "Loafers", "Sandals"),
                 ("Stridewell", "Harrow", "Pacefield", "Trailborn")),
    CategorySpec("beauty", "Beauty", 0.9, 22.0, 0.8,
                 ("Moisturizer", "Serum", "Lipstick", "Shampoo", "Perfume", "Sunscreen"),
                 ("Lumiere", "Botanica", "Velour", "Dewdrop", "Aurelle")),
    CategorySpec("sports-outdoors", "Sports & Outdoors", 0.9, 55.0, 0.9,
                 ("Yoga Mat", "Tent", "Backpack", "Water Bottle", "Dumbbells", "Bike Helmet"),
                 ("Trailborn", "Summitco", "Pacefield", "Ridgeback")),
    CategorySpec("toys-games", "Toys & Games", 0.8, 25.0, 0.8,
                 ("Board Game", "Puzzle", "Building Set", "Plush Toy", "RC Car"),
                 ("Playfinch", "Brickbury", "Wonderloom", "Kitewing")),
    CategorySpec("books", "Books", 1.1, 16.0, 0.5,
                 ("Novel", "Cookbook", "Biography", "Travel Guide", "Graphic Novel"),
                 ("Paperlark", "Inkwell Press", "Northgate Books", "Folio House")),
    CategorySpec("grocery", "Grocery", 0.7, 9.0, 0.6,
                 ("Coffee Beans", "Olive Oil", "Green Tea", "Granola", "Dark Chocolate"),
                 ("Copperleaf", "Harvest Lane", "Orchard & Vine", "Goodgrain")),
    CategorySpec("pet-supplies", "Pet Supplies", 0.5, 24.0, 0.7,
                 ("Dog Bed", "Cat Tree", "Pet Food", "Leash", "Chew Toy"),
                 ("Pawsome", "Tailwind", "Furrow")),
    CategorySpec("garden", "Garden", 0.5, 34.0, 0.8,
                 ("Planter", "Garden Hose", "Pruning Shears", "Seed Kit", "Bird Feeder"),
                 ("Greenwick", "Hearthly", "Fernbrook")),
    CategorySpec("video-games", "Video Games", 0.6, 45.0, 0.6,
                 ("Console Game", "Controller", "Gaming Headset", "Gift Card"),
                 ("Pixelforge", "Arcwave", "Novaplay")),
)  # fmt: skip

ADJECTIVES = (
    "Classic", "Compact", "Premium", "Essential", "Ultra", "Pro", "Lite", "Everyday",
    "Deluxe", "Smart", "Eco", "Wireless", "Portable", "Modern", "Vintage", "Signature",
    "Studio", "Travel", "Active", "Soft", "Bold", "Minimal", "Heritage", "Advanced",
)  # fmt: skip


def fingerprint(size: int, seed: int, dim: int) -> str:
    """Identity of a generated catalog; stored with every item to tell builds apart."""
    material = f"sample-catalog:v{GENERATOR_VERSION}:{size}:{seed}:{dim}"
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def item_id_of(row: int, size: int) -> str:
    """Id of the ``row``-th item of a catalog of ``size`` items: ``it-000042``."""
    return f"it-{row:0{max(6, len(str(size - 1)))}d}"


@dataclass(frozen=True)
class SampleCatalog:
    items: list[Item]
    text: npt.NDArray[np.float32]  # (n, dim), unit rows
    image: npt.NDArray[np.float32]  # (n, dim), unit rows
    unified: npt.NDArray[np.float32]  # (n, dim), unit rows
    fingerprint: str


def _unit_rows(matrix: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: npt.NDArray[np.float32] = (matrix / norms).astype(np.float32)
    return unit


def _noise(
    rng: np.random.Generator, size: int, dim: int, magnitude: float
) -> npt.NDArray[np.float64]:
    """Gaussian noise whose rows have an expected norm of about ``magnitude``."""
    noise: npt.NDArray[np.float64] = rng.standard_normal((size, dim)) * (magnitude / np.sqrt(dim))
    return noise


def fuse_weighted(
    text: npt.NDArray[np.float32], image: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """Weighted average of the two modalities, renormalised."""
    return _unit_rows(TEXT_WEIGHT * text.astype(np.float64) + IMAGE_WEIGHT * image)


def generate(size: int, seed: int, dim: int) -> SampleCatalog:
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    if dim < 8:
        raise ValueError(f"dim must be >= 8, got {dim}")
    rng = np.random.default_rng(seed)
    n_cat = len(CATEGORIES)
    shares = np.array([c.share for c in CATEGORIES])
    cat_idx = rng.choice(n_cat, size=size, p=shares / shares.sum())

    max_brands = max(len(c.brands) for c in CATEGORIES)
    centres = rng.standard_normal((n_cat, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    brand_offsets = rng.standard_normal((n_cat, max_brands, dim))
    brand_offsets *= 0.55 / np.linalg.norm(brand_offsets, axis=2, keepdims=True)
    price_direction = rng.standard_normal(dim)
    price_direction /= np.linalg.norm(price_direction)

    n_brands = np.array([len(c.brands) for c in CATEGORIES])[cat_idx]
    brand_idx = (rng.random(size) * n_brands).astype(np.int64)
    n_nouns = np.array([len(c.nouns) for c in CATEGORIES])[cat_idx]
    noun_idx = (rng.random(size) * n_nouns).astype(np.int64)
    adj_idx = rng.integers(0, len(ADJECTIVES), size=size)

    medians = np.array([c.price_median for c in CATEGORIES])[cat_idx]
    sigmas = np.array([c.price_sigma for c in CATEGORIES])[cat_idx]
    price_z = rng.standard_normal(size)
    # Shop prices: whole units minus a cent (24.99), never below 0.99.
    prices = np.floor(np.clip(medians * np.exp(sigmas * price_z), 1.0, 20_000.0)) - 0.01

    latent = (
        centres[cat_idx]
        + brand_offsets[cat_idx, brand_idx]
        + 0.15 * price_z[:, None] * price_direction
        + _noise(rng, size, dim, 0.7)
    )
    latent = latent / np.linalg.norm(latent, axis=1, keepdims=True)
    text = _unit_rows(latent + _noise(rng, size, dim, 0.45))
    image = _unit_rows(latent + _noise(rng, size, dim, 0.6))
    unified = fuse_weighted(text, image)

    # Zipf-like demand: a random order of items, popularity is the log-rank percentile.
    ranks = rng.permutation(size) + 1
    popularity = 1.0 - np.log(ranks) / np.log(size + 1)
    availability = rng.choice(3, size=size, p=[0.85, 0.10, 0.05])
    age_days = np.minimum(rng.exponential(180.0, size=size), 730.0)
    created_at = (AS_OF - age_days * 86_400).astype(np.int64)
    freshness = np.exp(-age_days / 90.0)
    model_no = rng.integers(100, 1000, size=size)
    states = (Availability.IN_STOCK, Availability.LIMITED, Availability.OUT_OF_STOCK)
    fp = fingerprint(size, seed, dim)

    items = []
    for i in range(size):
        spec = CATEGORIES[cat_idx[i]]
        brand = spec.brands[brand_idx[i]]
        item_id = item_id_of(i, size)
        title = f"{brand} {ADJECTIVES[adj_idx[i]]} {spec.nouns[noun_idx[i]]} {model_no[i]}"
        items.append(
            Item(
                item_id=item_id,
                title=title,
                category=spec.slug,
                category_name=spec.name,
                brand=brand,
                price=round(float(prices[i]), 2),
                availability=states[availability[i]],
                popularity=round(float(popularity[i]), 6),
                freshness=round(float(freshness[i]), 6),
                created_at=int(created_at[i]),
                image_url=f"https://img.example.com/items/{item_id}.jpg",
                modalities=("text", "image"),
                catalog=fp,
            )
        )
    return SampleCatalog(items=items, text=text, image=image, unified=unified, fingerprint=fp)
