"""A seeded model of browser traffic across regions.

Users differ in where they are (a region's countries, US states), what they use (device
mix), and how active they are (seed 000: 30% casual users with 1-2 interactions a day; the
rest active or power users, who also request more often). Each request is a page view with
a page type; after it, the user may interact with one of the items shown, more likely near
the top. Pure: a ``random.Random`` is passed in, so a seed replays the same traffic.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

# activity: (share of users, relative request rate, chance of feedback after a request)
ACTIVITY: dict[str, tuple[float, float, float]] = {
    "casual": (0.30, 1.0, 0.10),
    "active": (0.50, 3.0, 0.35),
    "power": (0.20, 8.0, 0.60),
}
DEVICES = (("mobile", 0.55), ("desktop", 0.35), ("tablet", 0.08), ("tv", 0.02))
PAGES = (("home", 0.40), ("category", 0.25), ("search", 0.15), ("item_detail", 0.20))
ACTIONS = (
    ("view", 0.45),
    ("click", 0.33),
    ("add_to_cart", 0.10),
    ("purchase", 0.05),
    ("dismiss", 0.07),
)
# Where users of each region come from: (country, region/state or None, weight).
REGION_ORIGINS: dict[str, tuple[tuple[str, str | None, float], ...]] = {
    "us-east": (("US", "NY", 0.35), ("US", "MA", 0.15), ("US", "TX", 0.2), ("US", "CA", 0.2),
                ("CA", None, 0.1)),
    "eu-west": (("GB", None, 0.35), ("FR", None, 0.2), ("DE", None, 0.25), ("ES", None, 0.1),
                ("SE", None, 0.1)),
    "ap-south": (("IN", None, 0.45), ("SG", None, 0.2), ("JP", None, 0.2), ("AU", None, 0.15)),
}  # fmt: skip
_DEFAULT_ORIGINS = (("US", "NY", 1.0),)


@dataclass(frozen=True, slots=True)
class SimUser:
    user_id: str
    region: str
    country: str
    state: str | None
    device: str
    activity: str


def _pick(rng: random.Random, table: Sequence[tuple[Any, ...]]) -> tuple[Any, ...]:
    return rng.choices(table, weights=[row[-1] for row in table])[0]


def make_population(size: int, regions: Sequence[str], seed: int) -> list[SimUser]:
    if size < 1:
        raise ValueError(f"population size must be >= 1, got {size}")
    if not regions:
        raise ValueError("at least one region is needed")
    rng = random.Random(seed)
    activities = list(ACTIVITY)
    users = []
    for n in range(size):
        region = regions[n % len(regions)]
        country, state, _ = _pick(rng, REGION_ORIGINS.get(region, _DEFAULT_ORIGINS))
        users.append(
            SimUser(
                user_id=f"u-{seed}-{n:06d}",
                region=region,
                country=country,
                state=state,
                device=_pick(rng, DEVICES)[0],
                activity=rng.choices(activities, weights=[ACTIVITY[a][0] for a in activities])[0],
            )
        )
    return users


def activity_pools(population: Sequence[SimUser]) -> dict[tuple[str, str], list[SimUser]]:
    """The population by (region, activity): the users a Locust user of one activity class
    in one region impersonates."""
    pools: dict[tuple[str, str], list[SimUser]] = {}
    for user in population:
        pools.setdefault((user.region, user.activity), []).append(user)
    return pools


def mean_wait_s(activity: str, casual_rps: float) -> float:
    """Mean pause between one browser's page views: a casual user makes ``casual_rps``
    requests a second, the others their relative rate times that (``ACTIVITY``)."""
    if casual_rps <= 0:
        raise ValueError(f"casual_rps must be > 0, got {casual_rps}")
    return 1.0 / (casual_rps * ACTIVITY[activity][1])


class Traffic:
    """Who requests next, what they ask for, and what they do with the answer."""

    def __init__(self, population: Sequence[SimUser]) -> None:
        if not population:
            raise ValueError("empty population")
        self.population = list(population)
        self._cum_weights = list(accumulate(ACTIVITY[u.activity][1] for u in self.population))

    def next_user(self, rng: random.Random) -> SimUser:
        return rng.choices(self.population, cum_weights=self._cum_weights)[0]

    @staticmethod
    def personalize_body(user: SimUser, rng: random.Random, count: int = 20) -> dict[str, Any]:
        geo: dict[str, str] = {"country": user.country}
        if user.state:
            geo["region"] = user.state
        return {
            "user_id": user.user_id,
            "session_id": f"s-{user.user_id}",
            "context": {
                "page_type": _pick(rng, PAGES)[0],
                "placement": "feed",
                "device": user.device,
                "geo": geo,
            },
            "constraints": {"count": count},
        }

    @staticmethod
    def feedback_body(
        user: SimUser, items: Sequence[dict[str, Any]], rng: random.Random, request_id: str
    ) -> dict[str, Any] | None:
        """An interaction with one shown item, or None when the user does nothing."""
        if not items or rng.random() >= ACTIVITY[user.activity][2]:
            return None
        # Position bias: each next slot is 25% less likely to be acted on.
        position = min(len(items) - 1, int(rng.expovariate(0.29)))
        return {
            "user_id": user.user_id,
            "session_id": f"s-{user.user_id}",
            "request_id": request_id,
            "feedback": [
                {
                    "item_id": items[position]["item_id"],
                    "action": _pick(rng, ACTIONS)[0],
                    "position": position,
                    "duration_ms": int(rng.expovariate(1 / 8000)),
                }
            ],
        }
