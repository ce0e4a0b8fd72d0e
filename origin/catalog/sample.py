"""A deterministic, realistic sample catalog: the same (size, seed, dim, vectors) gives the
same items.

Items belong to categories with their own brands, product nouns, price levels, content
type and length. Text vectors come from the configured text encoder (origin.catalog.text_encoder)
applied to the title; a sample title is a family name ("Voltaic Compact Headphones") and a
model number that means nothing, so each family is encoded once (10K items have about 6K
families, 100K about 9K: generation stays within seconds of the encoder's speed). Image
vectors stand in for an image model: an item's latent point is its category centre plus a
brand offset, a price-tier direction and noise, and its image vector is a noisy view of
that point. The unified vector is multi-modal fusion (origin.catalog.fusion) over text and
image. Demand is Zipf-like, availability mostly in stock, ages exponential over two years.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

from origin.catalog.fusion import fuse, unit_rows
from origin.catalog.item_vectors import ItemVectors
from origin.catalog.items import Availability, Item

# 2: content type and length, encoder text vectors, multi-modal fusion.
GENERATOR_VERSION = 2

# Ages and freshness are relative to this instant, so the catalog does not depend on "now".
AS_OF = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp())


@dataclass(frozen=True)
class CategorySpec:
    slug: str
    name: str
    share: float  # relative number of items
    price_median: float
    price_sigma: float  # of log(price)
    nouns: tuple[str, ...]
    brands: tuple[str, ...]
    content_type: str = "physical"  # catalog.CONTENT_TYPES
    content_length: str = "medium"  # catalog.CONTENT_LENGTHS


CATEGORIES: tuple[CategorySpec, ...] = (
    CategorySpec("electronics", "Electronics", 1.4, 89.0, 0.9,
                 ("Headphones", "Speaker", "Soundbar", "Earbuds", "Smartwatch", "Camera"),
                 ("Voltaic", "Nimbus", "Arcwave", "Helix", "Quanta", "Sonora")),
    CategorySpec("computers", "Computers", 0.9, 420.0, 0.8,
                 ("Laptop", "Monitor", "Keyboard", "Mouse", "Docking Station", "SSD"),
                 ("Quanta", "Bytecraft", "Lumen", "Northgate", "Corvid"), "physical", "long"),
    CategorySpec("phones", "Phones & Accessories", 0.8, 35.0, 1.1,
                 ("Smartphone", "Phone Case", "Charger", "Power Bank", "Screen Protector"),
                 ("Arcwave", "Pocketry", "Helix", "Ampere"), "physical", "short"),
    CategorySpec("home-kitchen", "Home & Kitchen", 1.3, 39.0, 0.8,
                 ("Blender", "Coffee Maker", "Knife Set", "Cookware Set", "Toaster", "Kettle"),
                 ("Hearthly", "Copperleaf", "Maison Vert", "Kitchmate", "Ovenbird")),
    CategorySpec("furniture", "Furniture", 0.6, 210.0, 0.7,
                 ("Sofa", "Desk", "Bookshelf", "Armchair", "Dining Table", "Bed Frame"),
                 ("Oakhaven", "Nordlys", "Loftline", "Timberwell"), "physical", "long"),
    CategorySpec("fashion-women", "Women's Fashion", 1.2, 45.0, 0.7,
                 ("Dress", "Blouse", "Jeans", "Coat", "Cardigan", "Skirt"),
                 ("Aurelle", "Mira Rose", "Linden & Co", "Solene", "Verity"), "apparel", "medium"),
    CategorySpec("fashion-men", "Men's Fashion", 1.0, 49.0, 0.7,
                 ("Shirt", "Chinos", "Jacket", "Sweater", "Polo", "Blazer"),
                 ("Harrow", "Linden & Co", "Marlowe", "Steadfast"), "apparel", "medium"),
    CategorySpec("shoes", "Shoes", 0.8, 75.0, 0.6,
                 ("Running Shoes", "Sneakers", "Boots", "Loafers", "Sandals"),
                 ("Stridewell", "Harrow", "Pacefield", "Trailborn"), "apparel", "medium"),
    CategorySpec("beauty", "Beauty", 0.9, 22.0, 0.8,
                 ("Moisturizer", "Serum", "Lipstick", "Shampoo", "Perfume", "Sunscreen"),
                 ("Lumiere", "Botanica", "Velour", "Dewdrop", "Aurelle"), "consumable", "short"),
    CategorySpec("sports-outdoors", "Sports & Outdoors", 0.9, 55.0, 0.9,
                 ("Yoga Mat", "Tent", "Backpack", "Water Bottle", "Dumbbells", "Bike Helmet"),
                 ("Trailborn", "Summitco", "Pacefield", "Ridgeback")),
    CategorySpec("toys-games", "Toys & Games", 0.8, 25.0, 0.8,
                 ("Board Game", "Puzzle", "Building Set", "Plush Toy", "RC Car"),
                 ("Playfinch", "Brickbury", "Wonderloom", "Kitewing")),
    CategorySpec("books", "Books", 1.1, 16.0, 0.5,
                 ("Novel", "Cookbook", "Biography", "Travel Guide", "Graphic Novel"),
                 ("Paperlark", "Inkwell Press", "Northgate Books", "Folio House"), "media", "long"),
    CategorySpec("grocery", "Grocery", 0.7, 9.0, 0.6,
                 ("Coffee Beans", "Olive Oil", "Green Tea", "Granola", "Dark Chocolate"),
                 ("Copperleaf", "Harvest Lane", "Orchard & Vine", "Goodgrain"),
                 "consumable", "short"),
    CategorySpec("pet-supplies", "Pet Supplies", 0.5, 24.0, 0.7,
                 ("Dog Bed", "Cat Tree", "Pet Food", "Leash", "Chew Toy"),
                 ("Pawsome", "Tailwind", "Furrow"), "consumable", "short"),
    CategorySpec("garden", "Garden", 0.5, 34.0, 0.8,
                 ("Planter", "Garden Hose", "Pruning Shears", "Seed Kit", "Bird Feeder"),
                 ("Greenwick", "Hearthly", "Fernbrook")),
    CategorySpec("video-games", "Video Games", 0.6, 45.0, 0.6,
                 ("Console Game", "Controller", "Gaming Headset", "Gift Card"),
                 ("Pixelforge", "Arcwave", "Novaplay"), "media", "long"),
)  # fmt: skip

# Nouns whose kind differs from their category's: (content type, content length).
NOUN_KINDS: dict[str, tuple[str, str]] = {
    "Gift Card": ("digital", "short"),
    "Controller": ("physical", "medium"),
    "Gaming Headset": ("physical", "medium"),
    "Dog Bed": ("physical", "medium"),
    "Cat Tree": ("physical", "medium"),
    "Leash": ("physical", "medium"),
}

ADJECTIVES = (
    "Classic", "Compact", "Premium", "Essential", "Ultra", "Pro", "Lite", "Everyday",
    "Deluxe", "Smart", "Eco", "Wireless", "Portable", "Modern", "Vintage", "Signature",
    "Studio", "Travel", "Active", "Soft", "Bold", "Minimal", "Heritage", "Advanced",
)  # fmt: skip


def fingerprint(size: int, seed: int, dim: int, vectors: str) -> str:
    """Identity of a generated catalog; stored with every item to tell builds apart.
    ``vectors`` is the ``ItemVectors.build_id`` (text encoder and fusion weights)."""
    material = f"sample-catalog:v{GENERATOR_VERSION}:{size}:{seed}:{dim}:{vectors}"
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def item_id_of(row: int, size: int) -> str:
    """Id of the ``row``-th item of a catalog of ``size`` items: ``it-000042``."""
    return f"it-{row:0{max(6, len(str(size - 1)))}d}"


@dataclass(frozen=True)
class SampleCatalog:
    items: list[Item]
    text: npt.NDArray[np.float32]  # (n, text encoder dim), unit rows
    image: npt.NDArray[np.float32]  # (n, image input dim of the fusion), unit rows
    unified: npt.NDArray[np.float32]  # (n, dim), unit rows
    fingerprint: str


def _noise(
    rng: np.random.Generator, size: int, dim: int, magnitude: float
) -> npt.NDArray[np.float64]:
    """Gaussian noise whose rows have an expected norm of about ``magnitude``."""
    noise: npt.NDArray[np.float64] = rng.standard_normal((size, dim)) * (magnitude / np.sqrt(dim))
    return noise


def _image_geometry(
    rng: np.random.Generator, dim: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Unit category centres, brand offsets of length 0.55, and a unit price direction."""
    max_brands = max(len(c.brands) for c in CATEGORIES)
    centres = rng.standard_normal((len(CATEGORIES), dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    brand_offsets = rng.standard_normal((len(CATEGORIES), max_brands, dim))
    brand_offsets *= 0.55 / np.linalg.norm(brand_offsets, axis=2, keepdims=True)
    price_direction = rng.standard_normal(dim)
    price_direction /= np.linalg.norm(price_direction)
    return centres, brand_offsets, price_direction


def family_vectors(
    families: list[str], encoder_rows: npt.NDArray[np.intp], vectors: ItemVectors
) -> npt.NDArray[np.float32]:
    """Text vectors of items whose title family is ``families[encoder_rows[i]]``."""
    encoded = vectors.encoder.encode(families)
    rows: npt.NDArray[np.float32] = encoded[encoder_rows]
    return rows


def generate(size: int, seed: int, dim: int, vectors: ItemVectors | None = None) -> SampleCatalog:
    """The sample catalog; ``vectors`` defaults to ``ItemVectors.default(dim)``, what
    default settings use."""
    vectors = _checked_vectors(size, dim, vectors)
    image_dim = vectors.modality_dims["image"]
    rng = np.random.default_rng(seed)
    draws, image = _draw(rng, size, image_dim)
    fp = fingerprint(size, seed, dim, vectors.build_id)
    items, families, item_family = _items(draws, size, fp)
    text = family_vectors(families, item_family, vectors)
    unified = fuse(vectors.fusion, {"text": text, "image": image})
    return SampleCatalog(items=items, text=text, image=image, unified=unified, fingerprint=fp)


def _checked_vectors(size: int, dim: int, vectors: ItemVectors | None) -> ItemVectors:
    """The item vectors a catalog of ``size`` items in dimension ``dim`` is built with
    (``vectors``, or the default ones); ValueError for a size, dimension or vectors that
    cannot make one."""
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    if dim < 8:
        raise ValueError(f"dim must be >= 8, got {dim}")
    vectors = vectors or ItemVectors.default(dim)
    if vectors.dim != dim:
        raise ValueError(f"item vectors fuse into dimension {vectors.dim}, not {dim}")
    return vectors


@dataclass(frozen=True)
class _Draws:
    """What was drawn for each item (one entry per item)."""

    category: npt.NDArray[np.int64]  # into CATEGORIES
    brand: npt.NDArray[np.int64]  # into its category's brands
    noun: npt.NDArray[np.int64]  # into its category's nouns
    adjective: npt.NDArray[np.int64]  # into ADJECTIVES
    price: npt.NDArray[np.float64]
    popularity: npt.NDArray[np.float64]
    availability: npt.NDArray[np.int64]  # 0 in stock, 1 limited, 2 out of stock
    created_at: npt.NDArray[np.int64]
    freshness: npt.NDArray[np.float64]
    model_no: npt.NDArray[np.int64]


def _draw(
    rng: np.random.Generator, size: int, image_dim: int
) -> tuple[_Draws, npt.NDArray[np.float32]]:
    """Every item's draws and its image vector. The order of the draws from ``rng`` is the
    catalog's: a seed gives the same catalog only as long as it stays the same."""
    n_cat = len(CATEGORIES)
    shares = np.array([c.share for c in CATEGORIES])
    cat_idx = rng.choice(n_cat, size=size, p=shares / shares.sum())

    centres, brand_offsets, price_direction = _image_geometry(rng, image_dim)

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
        + _noise(rng, size, image_dim, 0.7)
    )
    latent = latent / np.linalg.norm(latent, axis=1, keepdims=True)
    image = unit_rows(latent + _noise(rng, size, image_dim, 0.6))

    # Zipf-like demand: a random order of items, popularity is the log-rank percentile.
    ranks = rng.permutation(size) + 1
    popularity = 1.0 - np.log(ranks) / np.log(size + 1)
    availability = rng.choice(3, size=size, p=[0.85, 0.10, 0.05])
    age_days = np.minimum(rng.exponential(180.0, size=size), 730.0)
    created_at = (AS_OF - age_days * 86_400).astype(np.int64)
    freshness = np.exp(-age_days / 90.0)
    model_no = rng.integers(100, 1000, size=size)
    draws = _Draws(
        category=cat_idx,
        brand=brand_idx,
        noun=noun_idx,
        adjective=adj_idx,
        price=prices,
        popularity=popularity,
        availability=availability,
        created_at=created_at,
        freshness=freshness,
        model_no=model_no,
    )
    return draws, image


def _items(draws: _Draws, size: int, fp: str) -> tuple[list[Item], list[str], npt.NDArray[np.intp]]:
    """The items of catalog ``fp``, the distinct title families, and each item's family
    (its row in them)."""
    states = (Availability.IN_STOCK, Availability.LIMITED, Availability.OUT_OF_STOCK)
    items = []
    family_row: dict[str, int] = {}
    item_family = np.empty(size, dtype=np.intp)
    for i in range(size):
        spec = CATEGORIES[draws.category[i]]
        brand = spec.brands[draws.brand[i]]
        noun = spec.nouns[draws.noun[i]]
        item_id = item_id_of(i, size)
        family = f"{brand} {ADJECTIVES[draws.adjective[i]]} {noun}"
        item_family[i] = family_row.setdefault(family, len(family_row))
        content_type, content_length = NOUN_KINDS.get(
            noun, (spec.content_type, spec.content_length)
        )
        items.append(
            Item(
                item_id=item_id,
                title=f"{family} {draws.model_no[i]}",
                category=spec.slug,
                category_name=spec.name,
                brand=brand,
                price=round(float(draws.price[i]), 2),
                availability=states[draws.availability[i]],
                popularity=round(float(draws.popularity[i]), 6),
                freshness=round(float(draws.freshness[i]), 6),
                created_at=int(draws.created_at[i]),
                image_url=f"https://img.example.com/items/{item_id}.jpg",
                modalities=("text", "image"),
                catalog=fp,
                content_type=content_type,
                content_length=content_length,
            )
        )
    return items, list(family_row), item_family
