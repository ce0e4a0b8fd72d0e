"""The edges of ``benchmarks.hit_ratio`` under a traffic schedule, on a virtual clock.

No HTTP, no origin, no sleeping: the clock moves from event to event of
``benchmarks.traffic_model``, and every page view goes through the edge's request logic
as ``edge.service.personalize`` does it, awaited in asyncio against the edge's real
``MemoryEntryStore`` (its byte budget, LRU, and entries kept until ``stale_until``):

- **Segment**: the user's snapshot from ``UserViews`` (from the interactions it recorded),
  unless that is ``new``: then the segment in the user's token. A browser gets a token at
  its user's first request, again at the first request of each later visit (no request
  for ``session_idle_s``) and when the one it holds has expired (``token_ttl_s``); the
  token carries what ``origin.user_state`` says at issue: the user's interactions of the
  last 24 hours, as its interactions key holds them (the last 50, gone 24 hours after the
  last one). Here an edge sees every interaction of its users and forgets none of them,
  while the origin forgets a user after a day without one, so the token's segment is
  ``new`` whenever the edge's is: it would count for an edge whose ``UserViews`` dropped
  the user, or that never saw their feedback.
- **Key** from ``cache_key`` (page type, segment, geo bucket, device, 15-minute bucket of
  the edge's clock, recent hash for active and power users, variant), TTL from
  ``ttl_for(segment, ...)`` of the real ``TtlPolicy``.
- **Lookup** by ``edge.freshness``: FRESH is a hit; REVALIDATE (the refresh window) is a
  hit and starts one background refresh of the key unless one is under way; STALE and
  GONE are misses (the origin never fails here, so stale-if-error never serves).
- **Origin calls**: a miss fills the key; one call per key at a time, as the coalescer
  runs them: a miss or a refresh that finds the key's call in flight waits for it and
  calls nothing. Every call completes a fixed latency of simulated time after it started
  (0: at once), and its entry is stored then, as ``service.fill`` builds it: filled then,
  the request's TTL from then, ``stale_until`` ``stale_if_error_s`` later, the generation
  taken when the call started, tagged with its items.

Interactions are recorded into ``UserViews`` as the edge's ``/v1/feedback`` does, and are
the origin's record of the user for the tokens. One edge per region
(``loadtests.traffic.REGION_ORIGINS``); a user always reaches their region's edge. Not
modelled: rate limits (a user's page views come at least 2 s apart, an edge gets a few a
second: far under the free tier's 10 a second per user and 10,000 per API key), origin
failures and degraded answers, requests with exclusions.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from benchmarks.traffic_model import HISTORY_S, INTERACTION, REGIONS, Event
from edge.cache import CachedItem, Entry
from edge.cache_key import TIME_BUCKET_S, cache_key, time_bucket, variant
from edge.entry_store import MemoryEntryStore
from edge.freshness import Freshness, freshness, refresh_due
from edge.geo import default_bucket, geo_bucket
from edge.user_view import UserViews
from invalidation.ttl import TtlPolicy, ttl_for
from loadtests.traffic import SimUser, Traffic
from origin.user_state import Interaction, UserState
from perso.settings import Settings
from protocol.api import Explanation, ItemMetadata, PersonalizeRequest, RankedItem
from protocol.keys import INTERACTIONS_KEPT, USER_STATE_TTL_S
from protocol.segments import Segment, is_fine_grained

START_S = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the measured window starts on a bucket


class VirtualClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def origin_segment(interactions_ms: Sequence[int], now_s: float) -> Segment:
    """What ``origin.user_state`` says of a user at ``now_s`` (the segment a token issued
    then carries), given when they interacted (ms, oldest first): its interactions key
    holds the last ``INTERACTIONS_KEPT`` and is gone ``USER_STATE_TTL_S`` after the last."""
    now_ms = int(now_s * 1000)
    kept = [t for t in interactions_ms if t <= now_ms][-INTERACTIONS_KEPT:]
    if kept and now_ms - kept[-1] >= USER_STATE_TTL_S * 1000:
        kept = []
    newest_first = tuple(
        Interaction(interaction_id=str(n), item_id="", action="click", timestamp_ms=t)
        for n, t in enumerate(reversed(kept))
    )
    return UserState(interactions=newest_first).segment(now_ms)


class Tokens:
    """The tokens the users' browsers hold, and the origin's record of each user."""

    def __init__(self, *, ttl_s: int, visit_idle_s: float) -> None:
        self._ttl_s = ttl_s
        self._visit_idle_s = visit_idle_s
        self._interactions: dict[str, deque[int]] = {}
        self._held: dict[str, tuple[Segment, int]] = {}  # user -> (segment, expires_at)
        self._last_request: dict[str, float] = {}
        self.issued = 0

    def record(self, user_id: str, now: float) -> None:
        kept = self._interactions.setdefault(user_id, deque(maxlen=INTERACTIONS_KEPT))
        kept.append(int(now * 1000))

    def present(self, user_id: str, now: float) -> Segment:
        """The segment in the token the user's request carries at ``now``."""
        held = self._held.get(user_id)
        last = self._last_request.get(user_id)
        self._last_request[user_id] = now
        if held is None or held[1] <= now or last is None or now - last > self._visit_idle_s:
            issued = int(now)
            held = (origin_segment(self._interactions.get(user_id, ()), now), issued + self._ttl_s)
            self._held[user_id] = held
            self.issued += 1
        return held[0]


def fill_items(count: int) -> tuple[CachedItem, ...]:
    """What a fill holds: ``count`` items of a realistic size, shared by every entry (the
    store charges each entry for them all the same)."""
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


@dataclass
class SimEdge:
    default_geo: str
    max_mb: int
    store: MemoryEntryStore
    views: UserViews
    # key -> when the origin call filling it completes (the coalescer's fetch in flight)
    inflight: dict[str, float] = field(default_factory=dict)
    # keys with a background refresh under way (service.Edge._refreshing)
    refreshing: set[str] = field(default_factory=set)
    # generations of counted refreshes' entries that no request has read yet
    unread_refreshes: set[int] = field(default_factory=set)
    peak_bytes: int = 0


@dataclass(frozen=True, slots=True)
class Fill:
    """An origin call in flight: a miss's fill or a background refresh."""

    edge: SimEdge
    key: str
    ttl: float
    generation: int
    rule: str  # the TTL rule that set ttl (for the report)
    refresh: bool
    counted: bool


@dataclass
class Tally:
    requests: Counter[str] = field(default_factory=Counter)
    hits: Counter[str] = field(default_factory=Counter)
    misses: Counter[str] = field(default_factory=Counter)
    # fills, refreshes (origin calls), refreshes started, refreshes read, token segments
    events: Counter[str] = field(default_factory=Counter)

    def count(self, labels: Iterable[str], hit: bool) -> None:
        for label in labels:
            self.requests[label] += 1
            self.hits[label] += hit

    def ratio(self, label: str) -> float | None:
        requests = self.requests[label]
        return round(self.hits[label] / requests, 4) if requests else None

    @property
    def origin_calls(self) -> int:
        return self.events["fill"] + self.events["refresh"]

    def calls_per_request(self) -> float | None:
        requests = self.requests["all"]
        return round(self.origin_calls / requests, 4) if requests else None


def ttl_rule(segment: Segment, since: float | None, ttl: float, policy: TtlPolicy) -> str:
    """Which of the TTL rules set ``ttl`` (for the report only; ttl_for decides)."""
    settling = None if since is None else policy.settle_s - max(0.0, since)
    if is_fine_grained(segment) and ttl == settling:
        return "settle window"
    if ttl == policy.session_cap_s:
        return "session cap"
    return "segment TTL"


@dataclass
class Replay:
    """The edges, the origin calls in flight, and what the report needs to say why a
    request missed."""

    users: Sequence[SimUser]
    edges: dict[str, SimEdge]
    clock: VirtualClock
    policy: TtlPolicy
    tokens: Tokens
    items: tuple[CachedItem, ...]
    stale_if_error_s: float
    latency_s: float
    rng: random.Random
    tally: Tally = field(default_factory=Tally)
    # key -> (expires_at, the TTL rule that set it): an expired key from one never filled
    filled: dict[str, tuple[float, str]] = field(default_factory=dict)
    # (user, page type, bucket) -> the key of that user's last such request
    last_key: dict[tuple[str, str, int], str] = field(default_factory=dict)
    # (completes at, sequence, call)
    pending: list[tuple[float, int, Fill]] = field(default_factory=list)
    _sequence: itertools.count[int] = field(default_factory=itertools.count)
    tags: tuple[str, ...] = field(init=False)  # an entry's, as service.fill tags it

    def __post_init__(self) -> None:
        self.tags = tuple(item.item_id for item in self.items)

    async def run(self, events: Iterable[Event]) -> None:
        for t, kind, index, item in events:
            now = START_S + t
            await self.advance(now)
            user = self.users[index]
            edge = self.edges[user.region]
            if kind == INTERACTION:
                edge.views.record(user.user_id, [f"it-{item}"])
                self.tokens.record(user.user_id, now)
            else:
                body = PersonalizeRequest.model_validate(Traffic.personalize_body(user, self.rng))
                await self.request(edge, user.activity, body, counted=t >= 0)

    async def advance(self, now: float) -> None:
        """Move the clock to ``now``, storing the answers of the origin calls that complete
        by then as they complete."""
        while self.pending and self.pending[0][0] <= now:
            done, _, call = heapq.heappop(self.pending)
            self.clock.now = done
            edge = call.edge
            entry = Entry(
                items=self.items,
                complete=False,  # a full catalog returns as many items as a fill asks for
                model_version="nn-slice-1",
                exploration_applied=False,
                filled_at=done,
                expires_at=done + call.ttl,
                stale_until=done + call.ttl + self.stale_if_error_s,
                generation=call.generation,
                tags=self.tags,
            )
            if await edge.store.put(call.key, entry) and call.refresh and call.counted:
                edge.unread_refreshes.add(call.generation)
            edge.peak_bytes = max(edge.peak_bytes, edge.store.bytes)
            self.filled[call.key] = (done + call.ttl, call.rule)
            del edge.inflight[call.key]
            edge.refreshing.discard(call.key)
        self.clock.now = now

    async def request(
        self, edge: SimEdge, activity: str, body: PersonalizeRequest, *, counted: bool
    ) -> None:
        """``edge.service.personalize``'s key, lookup and origin calls for ``body``."""
        now = self.clock()
        user = edge.views.snapshot(body.user_id)
        token_segment = self.tokens.present(body.user_id, now)
        segment = user.segment if user.segment is not Segment.NEW else token_segment
        page = body.context.page_type.value
        key = cache_key(
            user_id=body.user_id,
            page_type=page,
            segment=segment,
            geo=geo_bucket(body.context.geo, edge.default_geo),
            device=body.context.device.value,
            now_s=now,
            recent_items=user.recent_items,
            variant_digest=variant(body),
        )
        since = user.since_interaction_s
        ttl = ttl_for(segment, since_interaction_s=since, policy=self.policy)
        rule = ttl_rule(segment, since, ttl, self.policy)
        count, exclude = body.constraints.count, frozenset(body.constraints.exclude_items)
        entry = await edge.store.get(key)
        state = Freshness.GONE
        if entry is not None:
            state = freshness(
                now,
                filled_at=entry.filled_at,
                expires_at=entry.expires_at,
                stale_until=entry.stale_until,
            )
        hit = (
            entry is not None
            and state in (Freshness.FRESH, Freshness.REVALIDATE)
            and entry.select(count, exclude) is not None
        )
        if entry is not None and hit:
            key_ends_at = time_bucket(now) + TIME_BUCKET_S
            if refresh_due(state, expires_at=entry.expires_at, key_ends_at=key_ends_at):
                self.refresh(edge, key, ttl, rule, counted=counted)
            if entry.generation in edge.unread_refreshes:
                edge.unread_refreshes.discard(entry.generation)
                self.tally.events["refresh read"] += 1
        else:
            cause = self.miss_cause(
                edge, key, user_id=body.user_id, page=page, segment=segment, now=now
            )
            self.call_origin(edge, key, ttl, rule, refresh=False, counted=counted)
            if counted:
                grain = "fine" if is_fine_grained(segment) else "coarse"
                self.tally.misses[f"{cause} ({grain})"] += 1
        self.last_key[(body.user_id, page, time_bucket(now))] = key
        if counted:
            if segment is not user.segment:
                self.tally.events["token segment"] += 1
            labels = (
                "all",
                f"segment:{segment}",
                f"class:{activity}",
                f"class:{activity}/segment:{segment}",
                f"page:{page}",
            )
            self.tally.count(labels, hit)

    def refresh(self, edge: SimEdge, key: str, ttl: float, rule: str, *, counted: bool) -> None:
        """``service._refresh_in_background``: one refresh per key at a time."""
        if key in edge.refreshing:
            return
        edge.refreshing.add(key)
        if counted:
            self.tally.events["refreshes started"] += 1
        self.call_origin(edge, key, ttl, rule, refresh=True, counted=counted)

    def call_origin(
        self, edge: SimEdge, key: str, ttl: float, rule: str, *, refresh: bool, counted: bool
    ) -> None:
        """Start a fill of ``key``, unless one is in flight: then wait for that one."""
        if key in edge.inflight:
            return
        done = self.clock() + self.latency_s
        generation = edge.store.next_generation()
        call = Fill(edge, key, ttl, generation, rule, refresh=refresh, counted=counted)
        edge.inflight[key] = done
        heapq.heappush(self.pending, (done, next(self._sequence), call))
        if counted:
            self.tally.events["refresh" if refresh else "fill"] += 1

    def miss_cause(
        self, edge: SimEdge, key: str, *, user_id: str, page: str, segment: Segment, now: float
    ) -> str:
        if key in edge.inflight:
            return "waited for the key's fill in flight"
        known = self.filled.get(key)
        if known is not None:
            expires_at, rule = known
            return f"expired: {rule}" if expires_at <= now else "evicted: byte budget"
        if not is_fine_grained(segment):
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


def make_replay(
    users: Sequence[SimUser], settings: Settings, seed: int, origin_latency_ms: float
) -> Replay:
    clock = VirtualClock(START_S - HISTORY_S)
    edges = {
        region: SimEdge(
            default_geo=default_bucket(region),
            max_mb=settings.edge_cache_max_mb,
            store=MemoryEntryStore(
                max_bytes=settings.edge_cache_max_mb * 2**20,
                clock=clock,
                generations=itertools.count(1).__next__,  # a seed replays them too
            ),
            views=UserViews(max_users=settings.edge_user_views_max, clock=clock),
        )
        for region in REGIONS
    }
    return Replay(
        users=users,
        edges=edges,
        clock=clock,
        policy=edge_policy(settings),
        tokens=Tokens(ttl_s=settings.token_ttl_s, visit_idle_s=settings.session_idle_s),
        items=fill_items(settings.edge_fill_items),
        stale_if_error_s=settings.edge_stale_if_error_s,
        latency_s=origin_latency_ms / 1000,
        rng=random.Random(seed + 2),
    )
