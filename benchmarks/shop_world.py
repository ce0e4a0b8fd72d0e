"""A simulated shop with hidden tastes: what ``benchmarks.learning`` measures learning in.

A policy that learns must be judged against what it could have done, so the world knows
the truth the policy never sees: each item's hidden taste vector ``z_i`` (latent dimension
8) and quality, each user's hidden preference ``u_j``. Policies see only the catalog
(``Catalog``): ids, categories, prices, a popularity (sigmoid(quality / 0.35 + N(0, 1)): a
noisy view of quality) and a VISIBLE vector ``v_i``, a noisy linear projection of ``(z_i,
category)`` into the product's embedding dimension (32), L2-normalised. A linear map of
``v_i`` explains 70-75% of the variance of ``z_i`` (``visible_r2``, seeds 1-3; tests hold
it within 0.6-0.85): informative, imperfect. Ranking each user's items by the best linear
fit of their attraction on ``v_i`` (fitted on the truth) still loses about 38% of the
oracle's clicks; the best single slate for everyone loses about 70%.

Users' taste sits in one to three favourite categories (40% / 35% / 25% of users): ``u_j``
is a mix of those categories' centroids plus a little of their own. Activity follows
``loadtests.traffic.ACTIVITY`` (20% power, 50% active, 30% casual; relative request rates
8 / 3 / 1), times a lognormal spread within a class, so a run mixes users with hundreds of
slates and users with a handful.

Clicks follow the position-based model of ``benchmarks.click_model``: examine(p) = 1 /
p^0.7 times attract(j, i) = sigmoid(a + b <u_j, z_i> + quality_i), a = -4.3, b = 3.6,
quality ~ N(0, 0.35). Calibration (measured on the default world by
``tests/unit/test_shop_world.py``): a user's best item attracts about 42% (median over
users; 35-50% for most), their tenth best about 32%, an item at random 4% on average (1.7%
median); the oracle's slate earns about 1.46 expected clicks, a random slate 0.16.

Regret is computed from expectations, not sampled clicks, so that it has little variance:
``expected_clicks(slate) = sum_p examine(p) attract(j, slate[p])``; the oracle slate is the
user's top-k items by attract in decreasing order (optimal under the position-based model
with decreasing examination: the rearrangement inequality). Outcomes fed back to a policy
are sampled from the click model by a stream of its own (``stream(seed, "outcomes",
name)``), so that each policy sees an independent but reproducible world, while the
requests (``requests``) are the same for every policy: same world, same run.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from benchmarks.click_model import (
    ClickModel,
    Flags,
    Matrix,
    Outcome,
    Rows,
    Vector,
    attraction,
    examination,
    expected_clicks,
    sigmoid,
    top_k,
)
from loadtests.traffic import ACTIVITY, DEVICES

CATEGORY_NAMES = (
    "Electronics",
    "Books",
    "Home & Kitchen",
    "Fashion",
    "Sports & Outdoors",
    "Beauty",
    "Toys & Games",
    "Grocery",
    "Garden",
    "Music",
    "Movies",
    "Pet Supplies",
    "Automotive",
    "Office",
    "Health",
    "Jewelry",
    "Baby",
    "Shoes",
    "Watches",
    "Furniture",
    "Lighting",
    "Tools",
    "Video Games",
    "Software",
    "Luggage",
    "Crafts",
    "Camping",
    "Cycling",
    "Fitness",
    "Stationery",
    "Party Supplies",
    "Collectibles",
    "Musical Instruments",
    "Photography",
    "Smart Home",
    "Computers",
    "Phones",
    "Wine",
    "Coffee & Tea",
    "Bedding",
    "Bath",
    "Cleaning",
    "Storage",
    "Kitchenware",
    "Board Games",
    "Comics",
    "Outdoor Cooking",
    "Swimwear",
)
# How many favourite categories a user has: 1, 2 or 3 with these chances.
FAVOURITE_COUNTS = (0.40, 0.35, 0.25)

# What a shop tells its personalization service of what a user did with a slate:
# - "clicks": clicks only (most shops: a click is all a page sees);
# - "dismisses": clicks, and the explicit dismisses of examined, strongly disliked items;
# - "graded": clicks, and the add-to-carts and purchases that follow some of them.
Feedback = Literal["clicks", "dismisses", "graded"]
FEEDBACK: tuple[Feedback, ...] = ("clicks", "dismisses", "graded")


@dataclass(frozen=True, slots=True)
class WorldConfig:
    items: int = 2_000
    categories: int = 16
    users: int = 300
    latent_dim: int = 8
    visible_dim: int = 32
    slate_size: int = 10
    # An item's taste is its category's centroid plus this much of its own (per dimension,
    # relative to the centroid's): items of a category are alike, not identical.
    item_spread: float = 0.55
    # A user's own share of taste beside their favourite categories' centroids.
    user_spread: float = 0.35
    quality_sd: float = 0.35
    # Visible vector = P z + category_signal * c_k + visible_noise * noise (each term's
    # expected squared norm is 1 x its coefficient squared): sets visible_r2 to ~0.7.
    category_signal: float = 0.5
    visible_noise: float = 1.2
    click: ClickModel = field(default_factory=ClickModel)
    feedback: Feedback = "dismisses"
    # The catalog's popularity attribute: sigmoid(quality / quality_sd + N(0, this)), a
    # noisy view of the hidden quality; None: the catalog carries no popularity at all.
    popularity_noise: float | None = 1.0
    # Shares of power, active and casual users (None: ``loadtests.traffic.ACTIVITY``'s);
    # their relative request rates are always ACTIVITY's (8 / 3 / 1).
    activity_shares: tuple[float, float, float] | None = None

    def __post_init__(self) -> None:
        if self.categories < 1 or self.categories > len(CATEGORY_NAMES):
            raise ValueError(f"categories must be in 1..{len(CATEGORY_NAMES)}")
        if self.items < max(self.slate_size, self.categories) or self.users < 1:
            raise ValueError("need users >= 1 and items >= max(slate_size, categories)")
        if self.slate_size < 1:
            raise ValueError("slate_size must be >= 1")
        if self.feedback not in FEEDBACK:
            raise ValueError(f"feedback must be one of {FEEDBACK}, not {self.feedback!r}")
        if self.popularity_noise is not None and self.popularity_noise < 0:
            raise ValueError("popularity_noise must be >= 0 (or None: no popularity)")
        shares = self.activity_shares
        if shares is not None and (len(shares) != 3 or min(shares) < 0 or sum(shares) <= 0):
            raise ValueError("activity_shares: three shares >= 0 (power, active, casual)")


@dataclass(frozen=True, slots=True)
class Catalog:
    """What a policy may know about the items: nothing hidden."""

    item_ids: tuple[str, ...]
    category: Rows
    category_names: tuple[str, ...]
    visible: Matrix
    price: Vector
    popularity: Vector | None  # None: the catalog has no popularity attribute
    titles: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Request:
    """One page view asking for a slate; identical for every policy of a run."""

    index: int
    user: int  # the user's row in the world (a policy may use it as an opaque id)
    user_id: str
    activity: str
    device: str
    count: int


@dataclass(frozen=True, slots=True)
class ShopWorld:
    config: WorldConfig
    catalog: Catalog
    taste: Matrix  # hidden z_i, (items, latent)
    quality: Vector  # hidden, in logits
    centroids: Matrix  # hidden category centroids, (categories, latent)
    preference: Matrix  # hidden u_j, (users, latent)
    favourites: tuple[tuple[int, ...], ...]
    user_ids: tuple[str, ...]
    activity: tuple[str, ...]
    device: tuple[str, ...]
    rate: Vector  # relative request rate of each user
    attract: Matrix  # (users, items)
    examine: Vector  # (slate_size,)
    oracle: Rows  # (users, slate_size): each user's best slate
    oracle_clicks: Vector  # (users,)
    index_of: dict[str, int]

    def rows(self, slate: list[str]) -> Rows:
        """The catalog rows of a policy's slate; a slate must hold known, distinct ids and
        no more than the slate size (fewer is allowed: the missing positions earn nothing)."""
        if len(slate) > self.config.slate_size:
            raise ValueError(f"a slate of {len(slate)} items, at most {self.config.slate_size}")
        if len(set(slate)) != len(slate):
            raise ValueError(f"a slate repeats an item: {slate}")
        try:
            return np.fromiter((self.index_of[i] for i in slate), np.intp, len(slate))
        except KeyError as exc:
            raise ValueError(f"a slate holds an unknown item: {exc.args[0]}") from exc


def oracle_slate(attract: Vector, k: int) -> Rows:
    """The top-k rows by attraction, best first: the best slate under the position-based
    model with decreasing examination."""
    return top_k(attract, k)


def regret(world: ShopWorld, user: int, rows: Rows) -> float:
    """Expected clicks lost against the oracle's slate for this user."""
    got = expected_clicks(world.attract[user, rows], world.examine)
    return float(world.oracle_clicks[user]) - got


def stream(seed: int, *labels: str) -> np.random.Generator:
    """A random stream of its own for (seed, labels): a policy's outcomes, its exploration.
    Labels are hashed with CRC-32 (stable across processes, unlike ``hash``)."""
    return np.random.default_rng([seed, *(zlib.crc32(label.encode()) for label in labels)])


def _unit(rows: Matrix) -> Matrix:
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)


def _items(config: WorldConfig, rng: np.random.Generator) -> tuple[Rows, Matrix, Matrix, Vector]:
    """Categories (mildly uneven sizes, every category used), centroids, tastes, quality."""
    d, k = config.latent_dim, config.categories
    centroids = _unit(rng.standard_normal((k, d)))
    weights = 1.0 / np.sqrt(np.arange(1, k + 1))
    category = np.concatenate(
        [np.arange(k), rng.choice(k, config.items - k, p=weights / weights.sum())]
    ).astype(np.intp)
    rng.shuffle(category)
    own = rng.standard_normal((config.items, d)) / math.sqrt(d)
    taste = _unit(centroids[category] + config.item_spread * own)
    quality = rng.normal(0.0, config.quality_sd, config.items)
    return category, centroids, taste, quality


def _visible(
    config: WorldConfig, rng: np.random.Generator, category: Rows, taste: Matrix
) -> Matrix:
    d, v = config.latent_dim, config.visible_dim
    projection = rng.standard_normal((d, v)) / math.sqrt(v)
    category_vectors = _unit(rng.standard_normal((config.categories, v)))
    noise = rng.standard_normal((config.items, v)) / math.sqrt(v)
    mixed = (
        taste @ projection
        + config.category_signal * category_vectors[category]
        + config.visible_noise * noise
    )
    return _unit(mixed)


def _users(
    config: WorldConfig, rng: np.random.Generator, centroids: Matrix
) -> tuple[Matrix, tuple[tuple[int, ...], ...]]:
    favourites: list[tuple[int, ...]] = []
    preference = np.empty((config.users, config.latent_dim))
    for j in range(config.users):
        count = min(config.categories, 1 + int(rng.choice(3, p=FAVOURITE_COUNTS)))
        chosen = tuple(int(c) for c in rng.choice(config.categories, count, replace=False))
        mix = rng.dirichlet(np.full(count, 2.0)) @ centroids[list(chosen)]
        own = rng.standard_normal(config.latent_dim) / math.sqrt(config.latent_dim)
        preference[j] = _unit(_unit(mix) + config.user_spread * own)
        favourites.append(chosen)
    return preference, tuple(favourites)


def _activity(
    config: WorldConfig, rng: np.random.Generator
) -> tuple[tuple[str, ...], tuple[str, ...], Vector]:
    classes = list(ACTIVITY)
    shares = np.array([ACTIVITY[c][0] for c in classes])
    if config.activity_shares is not None:
        given = dict(zip(("power", "active", "casual"), config.activity_shares, strict=True))
        shares = np.array([given[c] for c in classes])
    drawn = rng.choice(len(classes), config.users, p=shares / shares.sum())
    activity = tuple(classes[c] for c in drawn)
    spread = rng.lognormal(0.0, 0.5, config.users)
    rate = np.array([ACTIVITY[a][1] for a in activity]) * spread
    devices = [name for name, _ in DEVICES]
    device_p = np.array([w for _, w in DEVICES])
    device = tuple(devices[i] for i in rng.choice(len(devices), config.users, p=device_p))
    return activity, device, rate


def make_world(config: WorldConfig, seed: int) -> ShopWorld:
    """The world of ``seed``: everything hidden and visible, drawn from one stream."""
    rng = stream(seed, "world")
    category, centroids, taste, quality = _items(config, rng)
    visible = _visible(config, rng, category, taste)
    preference, favourites = _users(config, rng, centroids)
    activity, device, rate = _activity(config, rng)
    price = np.round(np.exp(rng.normal(3.0 + 0.1 * category, 0.6)), 2).astype(np.float64)
    hint_noise = rng.normal(0, 1.0, config.items)  # drawn in every world: same stream after
    popularity = (
        None
        if config.popularity_noise is None
        else np.round(
            sigmoid(quality / config.quality_sd + config.popularity_noise * hint_noise), 4
        )
    )
    names = CATEGORY_NAMES[: config.categories]
    item_ids = tuple(f"shop-{i + 1:05d}" for i in range(config.items))
    catalog = Catalog(
        item_ids=item_ids,
        category=category,
        category_names=names,
        visible=visible,
        price=price,
        popularity=popularity,
        titles=tuple(f"{names[c]} item {i + 1:05d}" for i, c in enumerate(category)),
    )
    click = config.click
    attract = attraction(preference, taste, quality, click.attract_bias, click.attract_scale)
    examine = examination(config.slate_size, click.examine_power)
    oracle = np.stack([oracle_slate(row, config.slate_size) for row in attract])
    oracle_clicks = np.array(
        [expected_clicks(attract[j, oracle[j]], examine) for j in range(config.users)]
    )
    return ShopWorld(
        config=config,
        catalog=catalog,
        taste=taste,
        quality=quality,
        centroids=centroids,
        preference=preference,
        favourites=favourites,
        user_ids=tuple(f"shopper-{j + 1:04d}" for j in range(config.users)),
        activity=activity,
        device=device,
        rate=rate,
        attract=attract,
        examine=examine,
        oracle=oracle,
        oracle_clicks=oracle_clicks,
        index_of={item_id: i for i, item_id in enumerate(item_ids)},
    )


def requests(world: ShopWorld, count: int, seed: int) -> list[Request]:
    """The run's requests: each from a user drawn in proportion to their request rate (the
    order of a Poisson process per user), the same for every policy."""
    rng = stream(seed, "requests")
    users = rng.choice(world.config.users, count, p=world.rate / world.rate.sum())
    return [
        Request(
            index=n,
            user=int(j),
            user_id=world.user_ids[j],
            activity=world.activity[j],
            device=world.device[j],
            count=world.config.slate_size,
        )
        for n, j in enumerate(users)
    ]


def catalog_items(world: ShopWorld) -> list[dict[str, Any]]:
    """The catalog as the product's admin API takes it (``POST /v1/admin/catalog/items``);
    ``image`` is the visible vector."""
    catalog = world.catalog
    items = [
        {
            "item_id": item_id,
            "version": 1,
            "title": catalog.titles[i],
            "category": f"cat-{int(catalog.category[i]) + 1:02d}",
            "category_name": catalog.category_names[int(catalog.category[i])],
            "price": float(catalog.price[i]),
            "image": [round(float(x), 6) for x in catalog.visible[i]],
        }
        for i, item_id in enumerate(catalog.item_ids)
    ]
    if catalog.popularity is not None:
        for item, popularity in zip(items, catalog.popularity, strict=True):
            item["popularity"] = float(popularity)
    return items


def reported(outcome: Outcome, feedback: Feedback) -> list[tuple[int, str]]:
    """What the shop tells of ``outcome`` under ``feedback`` (``Feedback``): (position,
    action) pairs, positions from 0, in position order; nothing for an ignored item."""
    kinds: list[tuple[Flags, str]] = [(outcome.clicked, "click")]
    if feedback == "graded":
        kinds += [(outcome.carted, "add_to_cart"), (outcome.purchased, "purchase")]
    elif feedback == "dismisses":
        kinds.append((outcome.dismissed, "dismiss"))
    return [
        (position, action)
        for position in range(len(outcome.clicked))
        for flags, action in kinds
        if bool(flags[position])
    ]


def visible_r2(world: ShopWorld) -> float:
    """How much of the hidden tastes' variance the best linear map of the visible vectors
    (with an intercept) explains, over the catalog."""
    x = np.hstack([world.catalog.visible, np.ones((world.config.items, 1))])
    z = world.taste
    coef, *_ = np.linalg.lstsq(x, z, rcond=None)
    residual = z - x @ coef
    return float(1.0 - residual.var(axis=0).sum() / z.var(axis=0).sum())


def _weighted_regret_pct(world: ShopWorld, users: Rows, earned: Vector) -> float:
    """Regret% over requests from ``users`` (one entry per request) of a policy that earns
    ``earned[j]`` expected clicks on each of user j's slates."""
    weight = np.bincount(users, minlength=world.config.users).astype(np.float64)
    return float(100.0 * (1.0 - weight @ earned / (weight @ world.oracle_clicks)))


def global_slate_regret_pct(world: ShopWorld, users: Rows) -> float:
    """Regret% of the best single slate for everyone (top k by attraction averaged over the
    requests' users): the best any non-personalised policy can do."""
    slate = top_k(world.attract[users].mean(axis=0), world.config.slate_size)
    return _weighted_regret_pct(world, users, world.attract[:, slate] @ world.examine)


def linear_slate_regret_pct(world: ShopWorld, users: Rows) -> float:
    """Regret% of each user's top k by the least-squares fit of their attraction on the
    visible vector and an intercept, fitted on the truth: roughly the best a linear model
    of the visible vectors can rank, with unlimited evidence."""
    x = np.hstack([world.catalog.visible, np.ones((world.config.items, 1))])
    coef, *_ = np.linalg.lstsq(x, world.attract.T, rcond=None)
    fitted = (x @ coef).T
    k = world.config.slate_size
    earned = np.array(
        [
            expected_clicks(world.attract[j, top_k(fitted[j], k)], world.examine)
            for j in range(world.config.users)
        ]
    )
    return _weighted_regret_pct(world, users, earned)
