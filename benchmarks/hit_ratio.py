"""Edge cache hit ratio on a seeded traffic model under the TTL rules (Algorithm 5).

No HTTP, no origin, no sleeping: a virtual clock moves from event to event, and every page
view goes through the edge's real logic as ``edge/app.py``'s ``personalize`` does it: the
user's snapshot from ``UserViews`` (segment from the interactions it recorded), the key from
``cache_key`` (page type, segment, geo bucket, device, 15-minute bucket of the edge's clock,
recent hash for active and power users, variant), a lookup in an ``EdgeCache`` with its
byte budget, and on a miss a fill stored for ``ttl_for(...)`` of the real ``TtlPolicy``.
Interactions are recorded into ``UserViews`` as the edge's ``/v1/feedback`` does. One edge
per region (``loadtests.traffic.REGION_ORIGINS``: us-east, eu-west, ap-south); a user
always reaches their region's edge.

The traffic model, and where each figure comes from:

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
- Seed 001 (Algorithm 5, "CACHE HIT RATES"): the estimate compared with, ~80% overall
  (power ~70%, active ~80%, casual ~90%).

The edges are configured as ``edge.app.create_app`` configures them from ``Settings``
(TTLs, settle window, byte budget, fill size, users remembered: the defaults unless
``PERSO_*`` variables say otherwise; the policy used is printed). Before the measured hours
the edges have recorded two days of the known users'
interactions (so segments and recent items are what a long-running edge would hold) and
served 15 minutes of requests (so the cache is warm); neither is counted.

Run: ``.venv/bin/python -m benchmarks.hit_ratio [--seed 1] [--users 50000] [--hours 3]``
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import random
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from benchmarks.report import finish, machine
from edge.cache import CachedItem, EdgeCache, Entry
from edge.cache_key import cache_key, time_bucket, variant
from edge.geo import default_bucket, geo_bucket
from edge.user_view import UserSnapshot, UserViews
from invalidation.ttl import TtlPolicy, ttl_for
from loadtests.traffic import ACTIVITY, REGION_ORIGINS, SimUser, Traffic, make_population
from perso.console import table
from perso.settings import Settings
from protocol.api import Explanation, ItemMetadata, PersonalizeRequest, RankedItem
from protocol.segments import Segment, is_fine_grained

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
START_S = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the measured window starts on a bucket
SEED_001 = {"overall": 0.8, "power": 0.7, "active": 0.8, "casual": 0.9}
TARGET = 0.9

INTERACTION, REQUEST = 0, 1
# (seconds from the window's start, kind, user index, item rank or -1)
Event = tuple[float, int, int, int]


# --- the traffic model: pure, a seed replays it --------------------------------------------


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


def schedule(users: Sequence[SimUser], seed: int, hours: float) -> list[Event]:
    """Everything that happens, in time order: known users' interactions from two days
    before the window, and every request from the warm-up on."""
    rng = random.Random(seed)
    cum_weights = zipf_cum_weights(CATALOG_ITEMS, ZIPF_S)
    end = hours * 3600.0
    events: list[Event] = []
    for index, user in enumerate(users):
        for t, kind, item in user_events(user, rng, -HISTORY_S, end, cum_weights):
            if t < end and (kind == INTERACTION or t >= -WARMUP_S):
                events.append((t, kind, index, item))
    events.sort()
    return events


# --- the edges under the traffic -----------------------------------------------------------


class VirtualClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _fill_items(count: int) -> tuple[CachedItem, ...]:
    """What a fill holds: ``count`` items of a realistic size, shared by every entry (the
    cache charges each entry for them all the same)."""
    return tuple(
        CachedItem.of(
            RankedItem(
                item_id=f"it-{n}",
                rank=n,
                score=1.0 - n / 1000,
                source="collaborative",
                explanation=Explanation(
                    primary_reason="Because you viewed similar items",
                    signals=["recent_views", "category_affinity"],
                ),
                metadata=ItemMetadata(
                    title=f"Sample catalog item number {n}",
                    category="Home & Kitchen",
                    price=24.99,
                    image_url=f"https://cdn.example.com/items/it-{n}.jpg",
                ),
            )
        )
        for n in range(1, count + 1)
    )


def make_entry(items: tuple[CachedItem, ...], expires_at: float) -> Entry:
    # The one place entries are built: the cache's Entry is gaining optional fields.
    return Entry(
        items=items,
        complete=False,  # a full catalog returns as many items as a fill asks for
        model_version="nn-slice-1",
        exploration_applied=False,
        expires_at=expires_at,
    )


@dataclass
class SimEdge:
    default_geo: str
    max_mb: int
    cache: EdgeCache
    views: UserViews
    peak_bytes: int = 0


@dataclass
class Tally:
    requests: Counter[str] = field(default_factory=Counter)
    hits: Counter[str] = field(default_factory=Counter)
    misses: Counter[str] = field(default_factory=Counter)

    def count(self, labels: Iterable[str], hit: bool) -> None:
        for label in labels:
            self.requests[label] += 1
            self.hits[label] += hit

    def ratio(self, label: str) -> float | None:
        requests = self.requests[label]
        return round(self.hits[label] / requests, 4) if requests else None


def request_key(edge: SimEdge, body: PersonalizeRequest, user: UserSnapshot, now: float) -> str:
    """The key ``edge.app.personalize`` computes for ``body``."""
    return cache_key(
        user_id=body.user_id,
        page_type=body.context.page_type.value,
        segment=user.segment,
        geo=geo_bucket(body.context.geo, edge.default_geo),
        device=body.context.device.value,
        now_s=now,
        recent_items=user.recent_items,
        variant_digest=variant(body),
    )


def ttl_rule(user: UserSnapshot, ttl: float, policy: TtlPolicy) -> str:
    """Which of the TTL rules set ``ttl`` (for the report only; ttl_for decides)."""
    since = user.since_interaction_s
    settling = None if since is None else policy.settle_s - max(0.0, since)
    if is_fine_grained(user.segment) and ttl == settling:
        return "settle window"
    if ttl == policy.session_cap_s:
        return "session cap"
    return "segment TTL"


@dataclass
class Replay:
    """The edges, and what the report needs to say why a request missed."""

    users: Sequence[SimUser]
    edges: dict[str, SimEdge]
    clock: VirtualClock
    policy: TtlPolicy
    items: tuple[CachedItem, ...]
    rng: random.Random
    tally: Tally = field(default_factory=Tally)
    # key -> (expires_at, the TTL rule that set it): an expired key from one never filled
    filled: dict[str, tuple[float, str]] = field(default_factory=dict)
    # (user, page type, bucket) -> the key of that user's last such request
    last_key: dict[tuple[str, str, int], str] = field(default_factory=dict)

    def run(self, events: Iterable[Event]) -> None:
        for t, kind, index, item in events:
            self.clock.now = START_S + t
            user = self.users[index]
            edge = self.edges[user.region]
            if kind == INTERACTION:
                edge.views.record(user.user_id, [f"it-{item}"])
            else:
                self.request(edge, user, counted=t >= 0)

    def request(self, edge: SimEdge, sim_user: SimUser, *, counted: bool) -> None:
        body = PersonalizeRequest.model_validate(Traffic.personalize_body(sim_user, self.rng))
        now = self.clock()
        user = edge.views.snapshot(body.user_id)
        key = request_key(edge, body, user, now)
        count, exclude = body.constraints.count, frozenset(body.constraints.exclude_items)
        entry = edge.cache.get(key)
        hit = entry is not None and entry.select(count, exclude) is not None
        page = body.context.page_type.value
        if not hit:
            cause = self.miss_cause(key, body.user_id, page, user, now)
            ttl = ttl_for(
                user.segment, since_interaction_s=user.since_interaction_s, policy=self.policy
            )
            edge.cache.put(key, make_entry(self.items, now + ttl))
            edge.peak_bytes = max(edge.peak_bytes, edge.cache.bytes)
            self.filled[key] = (now + ttl, ttl_rule(user, ttl, self.policy))
            if counted:
                self.tally.misses[
                    f"{cause} ({'fine' if is_fine_grained(user.segment) else 'coarse'})"
                ] += 1
        self.last_key[(body.user_id, page, time_bucket(now))] = key
        if counted:
            labels = (
                "all",
                f"segment:{user.segment}",
                f"class:{sim_user.activity}",
                f"class:{sim_user.activity}/segment:{user.segment}",
                f"page:{page}",
            )
            self.tally.count(labels, hit)

    def miss_cause(self, key: str, user_id: str, page: str, user: UserSnapshot, now: float) -> str:
        known = self.filled.get(key)
        if known is not None:
            expires_at, rule = known
            return f"expired: {rule}" if expires_at <= now else "evicted: byte budget"
        if not is_fine_grained(user.segment):
            return "first of a shared key in its 15-min bucket"
        previous = self.last_key.get((user_id, page, time_bucket(now)))
        if previous is not None:
            return "re-keyed since the user's last such page (interactions, segment)"
        return "first of this page for the user in its 15-min bucket"


def edge_policy(settings: Settings) -> TtlPolicy:
    """The TTL policy ``edge.app.create_app`` builds from the same settings."""
    return TtlPolicy(
        power_s=settings.edge_ttl_power_s,
        active_s=settings.edge_ttl_active_s,
        casual_s=settings.edge_ttl_casual_s,
        session_cap_s=settings.edge_ttl_session_cap_s,
        session_idle_s=settings.session_idle_s,
        settle_s=settings.edge_settle_s,
    )


def make_replay(users: Sequence[SimUser], settings: Settings, seed: int) -> Replay:
    clock = VirtualClock(START_S - HISTORY_S)
    edges = {
        region: SimEdge(
            default_geo=default_bucket(region),
            max_mb=settings.edge_cache_max_mb,
            cache=EdgeCache(max_bytes=settings.edge_cache_max_mb * 2**20, clock=clock),
            views=UserViews(max_users=settings.edge_user_views_max, clock=clock),
        )
        for region in REGIONS
    }
    return Replay(
        users=users,
        edges=edges,
        clock=clock,
        policy=edge_policy(settings),
        items=_fill_items(settings.edge_fill_items),
        rng=random.Random(seed + 2),
    )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _rows(tally: Tally, prefix: str, labels: Iterable[str]) -> list[list[object]]:
    return [
        [label, f"{tally.requests[prefix + label]:,}", _pct(tally.ratio(prefix + label))]
        for label in labels
        if tally.requests[prefix + label]
    ]


def print_report(replay: Replay, users: Sequence[SimUser], hours: float) -> None:
    tally = replay.tally
    classes = Counter(user.activity for user in users)
    print(
        f"hit ratio: {len(users):,} users "
        + ", ".join(f"{classes[c]:,} {c}" for c in CLASSES)
        + f"; {hours:g} h of traffic on {len(replay.edges)} edges; TTL policy {replay.policy}"
    )
    pages = sorted(
        {label.removeprefix("page:") for label in tally.requests if label[:5] == "page:"}
    )
    print()
    print(table(["edge segment", "requests", "hit ratio"], _rows(tally, "segment:", Segment)))
    print()
    print(table(["user class (model)", "requests", "hit ratio"], _rows(tally, "class:", CLASSES)))
    print()
    print("how the edge sees each class (share of the class's requests per edge segment):")
    rows = [
        [c]
        + [
            _pct(tally.requests[f"class:{c}/segment:{s}"] / tally.requests[f"class:{c}"])
            for s in Segment
        ]
        for c in CLASSES
        if tally.requests[f"class:{c}"]
    ]
    print(table(["user class", *Segment], rows))
    print()
    print(table(["page type", "requests", "hit ratio"], _rows(tally, "page:", pages)))
    print()
    misses = sum(tally.misses.values())
    rows = [[cause, f"{n:,}", _pct(n / misses)] for cause, n in tally.misses.most_common()]
    print(table(["why a request missed", "misses", "share"], rows))
    print()
    for region, edge in replay.edges.items():
        print(
            f"edge {region}: {len(edge.cache):,} entries, peak {edge.peak_bytes / 2**20:,.1f} MB "
            f"of {edge.max_mb:,} MB, {len(edge.views):,} users known"
        )
    print(
        f"overall: {_pct(tally.ratio('all'))} of {tally.requests['all']:,} requests "
        f"(seed 001 estimates {_pct(SEED_001['overall'])}; target {_pct(TARGET)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--users", type=int, default=50_000)
    parser.add_argument("--hours", type=float, default=3.0)
    parser.add_argument(
        "--new-share", type=float, default=NEW_SHARE, help="first-time visitors' share of visits"
    )
    args = parser.parse_args()
    if args.users < 1 or args.hours <= 0 or not 0 <= args.new_share < 1:
        parser.error("--users must be >= 1, --hours > 0 and --new-share in [0, 1)")

    started = time.perf_counter()
    users = make_users(args.users, args.seed, args.hours, args.new_share)
    events = schedule(users, args.seed, args.hours)
    replay = make_replay(users, Settings(), args.seed)
    replay.run(events)
    wall_s = time.perf_counter() - started

    print(f"machine: {machine()}")
    print_report(replay, users, args.hours)
    print(f"simulated in {wall_s:.1f} s wall time")
    tally = replay.tally
    overall = tally.ratio("all")
    finish(
        {
            "hit_ratio": overall,
            "hit_ratio_by_segment": {s.value: tally.ratio(f"segment:{s}") for s in Segment},
            "hit_ratio_by_user_class": {c: tally.ratio(f"class:{c}") for c in CLASSES},
            "hit_ratio_by_page": {
                label.removeprefix("page:"): tally.ratio(label)
                for label in sorted(tally.requests)
                if label.startswith("page:")
            },
            "requests": tally.requests["all"],
            "misses_by_cause": dict(tally.misses.most_common()),
            "seed_001_estimate": SEED_001["overall"],
            "seed_001_by_segment": {k: v for k, v in SEED_001.items() if k != "overall"},
            "ratio_vs_seed_estimate": (
                round(overall / SEED_001["overall"], 3) if overall is not None else None
            ),
            "target": TARGET,
            "meets_target": overall is not None and overall >= TARGET,
            "users": args.users,
            "hours": args.hours,
            "new_share": args.new_share,
            "seed": args.seed,
            "wall_s": round(wall_s, 1),
        }
    )


if __name__ == "__main__":
    main()
