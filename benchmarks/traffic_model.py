"""The seeded traffic model ``benchmarks.hit_ratio`` replays: who comes, when, and what
they click. Pure: a seed replays it.

Where each figure comes from:

- Seed 000 ("Bottleneck 1"): 30% of users are casual with 1-2 interactions a day; active
  users have 3-10, power users more than 10. Each known user gets an interaction rate drawn
  uniformly from their class's range; power users' upper bound (30 a day) is ours.
- ``loadtests.traffic`` (this repository's demo model, not a seed): the other 70% split
  50% active, 20% power; the chance that a page view is followed by an interaction (10%,
  35%, 60%), which sets page views a day = interactions a day / that chance (casual ~15,
  active ~19, power ~34); device mix, page-type weights (home 40%, category 25%, search
  15%, item_detail 20%: the API's page types, there is no cart page), the countries and US
  states behind each region; the 8 s mean dwell before an interaction.
- Ours (no seed gives them): first-time visitors make 10% of the visits in the window
  (``--new-share``; one visit each, ``new`` until they interact, interacting like casual
  users; with the defaults about 2,300 of the 50K users); page views come in sessions of 6
  on average (geometric), 2 s + an exponential 40 s mean apart, the sessions a Poisson
  process over the day (no daily peak); an interaction's item is drawn from a Zipf(1.0)
  popularity over a 10K-item catalog (the demo's catalog size); every request asks for 20
  items with no filters, exclusions or options (variant ""), as the demo's browsers do.
  Item-detail pages draw no product: the key has no item in it.

The schedule holds two days of the known users' interactions before the measured window
(so that an edge's view of them is what a long-running edge would hold) and every request
from a warm-up before the window on.
"""

from __future__ import annotations

import bisect
import dataclasses
import random
from collections.abc import Sequence
from itertools import accumulate

from loadtests.traffic import ACTIVITY, REGION_ORIGINS, SimUser, make_population

REGIONS = tuple(REGION_ORIGINS)
NEW = "new"  # first-time visitors, besides loadtests.traffic's activity classes
CLASSES = (NEW, *ACTIVITY)

INTERACTIONS_PER_DAY: dict[str, tuple[float, float]] = {
    "casual": (1.0, 2.0),  # seed 000: 1-2 a day
    "active": (3.0, 10.0),  # seed 000: 3-10
    "power": (11.0, 30.0),  # seed 000: more than 10; the upper bound is ours
}
NEW_SHARE = 0.10
CATALOG_ITEMS = 10_000
ZIPF_S = 1.0
PAGES_PER_SESSION = 6.0
PAGE_GAP_MIN_S = 2.0
PAGE_GAP_MEAN_S = 40.0
DWELL_MEAN_S = 8.0
HISTORY_S = 2 * 86_400
WARMUP_S = 900.0
DAY_S = 86_400.0

INTERACTION, REQUEST = 0, 1
# (seconds from the window's start, kind, user index, item rank or -1)
Event = tuple[float, int, int, int]


def zipf_cum_weights(n: int, s: float) -> list[float]:
    """Cumulative weights of ranks 1..n with P(rank k) proportional to 1 / k**s."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return list(accumulate(1.0 / k**s for k in range(1, n + 1)))


def zipf_rank(rng: random.Random, cum_weights: Sequence[float]) -> int:
    """A rank from 1 (most popular) to len(cum_weights)."""
    return bisect.bisect_right(cum_weights, rng.random() * cum_weights[-1]) + 1


def feedback_chance(activity: str) -> float:
    return ACTIVITY["casual" if activity == NEW else activity][2]


def sessions_per_day(activity: str) -> float:
    """A known user's mean visits a day: interactions / chance per page / pages per visit."""
    low, high = INTERACTIONS_PER_DAY[activity]
    return (low + high) / 2 / feedback_chance(activity) / PAGES_PER_SESSION


def visitor_count(count: int, hours: float, new_share: float) -> int:
    """How many of ``count`` users are first-time visitors (one visit each in the window)
    so that they make ``new_share`` of the window's visits."""
    if not 0 <= new_share < 1:
        raise ValueError(f"new_share must be in [0, 1), got {new_share}")
    known_visits = hours / 24 * sum(ACTIVITY[c][0] * sessions_per_day(c) for c in ACTIVITY)
    per_known = new_share / (1 - new_share) * known_visits  # visitors per known user
    return round(count * per_known / (1 + per_known))


def make_users(count: int, seed: int, hours: float, new_share: float = NEW_SHARE) -> list[SimUser]:
    """Known users in ``loadtests.traffic``'s mix, then first-time visitors."""
    new = visitor_count(count, hours, new_share)
    known = make_population(count - new, REGIONS, seed) if count > new else []
    visitors = make_population(new, REGIONS, seed + 1) if new else []
    return known + [
        dataclasses.replace(user, user_id=f"anon-{seed}-{n:06d}", activity=NEW)
        for n, user in enumerate(visitors)
    ]


def pages_in_session(rng: random.Random) -> int:
    pages = 1
    while rng.random() >= 1.0 / PAGES_PER_SESSION:
        pages += 1
    return pages


def session(
    rng: random.Random, start: float, chance: float, cum_weights: Sequence[float]
) -> list[tuple[float, int, int]]:
    """One visit's page views and the interactions after some of them: (t, kind, item)."""
    out = []
    t = start
    for _ in range(pages_in_session(rng)):
        gap = PAGE_GAP_MIN_S + rng.expovariate(1.0 / PAGE_GAP_MEAN_S)
        out.append((t, REQUEST, -1))
        if rng.random() < chance:
            # The interaction comes before the user's next page view.
            dwell = min(rng.expovariate(1.0 / DWELL_MEAN_S), gap - 1.0)
            out.append((t + dwell, INTERACTION, zipf_rank(rng, cum_weights)))
        t += gap
    return out


def user_events(
    user: SimUser, rng: random.Random, start: float, end: float, cum_weights: Sequence[float]
) -> list[tuple[float, int, int]]:
    """A user's traffic between ``start`` and ``end`` (seconds); a first-time visitor's
    single session starts anywhere in [0, end)."""
    chance = feedback_chance(user.activity)
    if user.activity == NEW:
        return session(rng, rng.uniform(0.0, end), chance, cum_weights)
    low, high = INTERACTIONS_PER_DAY[user.activity]
    sessions_per_s = rng.uniform(low, high) / chance / PAGES_PER_SESSION / DAY_S
    out: list[tuple[float, int, int]] = []
    t = start + rng.expovariate(sessions_per_s)
    while t < end:
        out += session(rng, t, chance, cum_weights)
        t += rng.expovariate(sessions_per_s)
    return out


def schedule(
    users: Sequence[SimUser], seed: int, hours: float, warmup_s: float = WARMUP_S
) -> list[Event]:
    """Everything that happens, in time order: known users' interactions from two days
    before the window, and every request from the warm-up (``warmup_s`` before the
    window) on."""
    rng = random.Random(seed)
    cum_weights = zipf_cum_weights(CATALOG_ITEMS, ZIPF_S)
    end = hours * 3600.0
    events: list[Event] = []
    for index, user in enumerate(users):
        for t, kind, item in user_events(user, rng, -HISTORY_S, end, cum_weights):
            if t < end and (kind == INTERACTION or t >= -warmup_s):
                events.append((t, kind, index, item))
    events.sort()
    return events
