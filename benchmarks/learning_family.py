"""The family of simulated shops ``benchmarks.learning`` measures learning in.

One shop proves little: a learner tuned to it may fail the next. The family varies what a
shop's data is like along the dimensions of ``benchmarks.shop_world.WorldConfig``: what
feedback the shop reports (clicks only; clicks and dismisses; clicks, carts and
purchases), whether its catalog carries a popularity attribute and how noisy it is, how
many items and users, the activity mix, and how much of the hidden tastes the visible
vectors show (``visible_r2``, the share of the tastes' variance a linear map of the
visible vectors explains, measured on seeds 1-3 and quoted in each summary).

Every shop is run for ``slates`` slates; the product's runs are paced at ``pace`` slates a
second (the product learns with a lag in seconds, so the pace sets how many slates that
lag spans: a shop with more users spreads its slates over more of them, and is paced
faster; the subtle shop, with few users and weak signals, slower).

``clicks``, ``graded`` and ``many_users`` share their catalog on a seed (same items, same
visible vectors: the catalog is drawn first); they differ in users and what is reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.shop_world import WorldConfig


@dataclass(frozen=True, slots=True)
class Shop:
    """One world of the family: its name, what it is, its world and how it is run."""

    name: str
    summary: str
    config: WorldConfig
    slates: int
    pace: float  # slates a second the product's runs are paced at

    def __post_init__(self) -> None:
        if self.slates < 1 or self.pace <= 0:
            raise ValueError(f"shop {self.name}: slates and pace must be positive")


FAMILY: tuple[Shop, ...] = (
    Shop(
        "clicks",
        "clicks only, no popularity attribute; 2,000 items in 20 categories, 600 users "
        "(visible_r2 0.72-0.74)",
        WorldConfig(categories=20, users=600, feedback="clicks", popularity_noise=None),
        slates=8_000,
        pace=60.0,
    ),
    Shop(
        "dismisses",
        "the former benchmark world: 2,000 items in 16 categories, 300 users, clicks and "
        "dismisses, a noisy popularity (visible_r2 0.71-0.74)",
        WorldConfig(),
        slates=8_000,
        pace=60.0,
    ),
    Shop(
        "graded",
        "clicks, add-to-carts and purchases, a very noisy popularity; 2,000 items in 20 "
        "categories, 600 users (visible_r2 0.72-0.74)",
        WorldConfig(categories=20, users=600, feedback="graded", popularity_noise=2.0),
        slates=8_000,
        pace=60.0,
    ),
    Shop(
        "large_catalog",
        "20,000 items in 40 categories, 600 users, clicks only, no popularity attribute "
        "(visible_r2 0.68-0.70)",
        WorldConfig(
            items=20_000, categories=40, users=600, feedback="clicks", popularity_noise=None
        ),
        slates=8_000,
        pace=60.0,
    ),
    Shop(
        "many_users",
        "3,000 users, 70% of them casual (5% power, 25% active), clicks only, a noisy "
        "popularity; 2,000 items in 20 categories (visible_r2 0.72-0.74)",
        WorldConfig(
            categories=20,
            users=3_000,
            feedback="clicks",
            popularity_noise=1.0,
            activity_shares=(0.05, 0.25, 0.70),
        ),
        slates=8_000,
        pace=120.0,
    ),
    Shop(
        "subtle",
        "weak visible signals: hidden tastes of 16 dimensions behind noisier visible "
        "vectors; 2,000 items in 20 categories, 300 users, clicks only, no popularity "
        "attribute (visible_r2 0.48-0.50)",
        WorldConfig(
            categories=20,
            users=300,
            feedback="clicks",
            popularity_noise=None,
            latent_dim=16,
            visible_noise=1.6,
        ),
        slates=8_000,
        pace=30.0,
    ),
)
NAMES: tuple[str, ...] = tuple(s.name for s in FAMILY)


def shop(name: str) -> Shop:
    """The family's shop called ``name``; KeyError naming the family's shops otherwise."""
    for candidate in FAMILY:
        if candidate.name == name:
            return candidate
    raise KeyError(f"no shop {name!r} in the family; its shops: {', '.join(NAMES)}")
