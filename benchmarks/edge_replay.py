"""The edges of ``benchmarks.hit_ratio`` under a traffic schedule, on a virtual clock.

No network, no origin process, no sleeping: the clock moves from event to event of
``benchmarks.traffic_model``, and every page view goes through the edge's request logic
as ``edge.serve.personalize.personalize`` does it, awaited in asyncio against a real ``Edge`` per
region (its ``MemoryEntryStore``: byte budget, LRU, entries kept until ``stale_until``;
its ``UserViews``; its ``TtlPolicy``; its user table and sync applier). The verifier, rate
limiter and popular list are built but never used.

- **Ranked at the edge** (when ``edge_ranking`` is on): a request ``answer_here`` takes
  (a power or active user's) is answered by it, the real code: pool key, pool lookup,
  the user table, ``rank_pool``, background refreshes (run at once, after the request).
  Its origin client asks ``benchmarks.replay_origin.SimOrigin`` through an ``httpx`` mock
  transport (pool fills, users' states, on the wire as the origin sends them). Every
  interaction is a new model of its user, applied by the edge's ``SyncApplier`` as a
  ``UserUpdate`` (with the user's preferences) ``SYNC_DELAY_S`` later. The rest of this
  list is the path of every other request (and of all of them with ``edge_ranking``
  off), whose origin calls are simulated here:
- **Key** by ``edge.serve.fill.key_of``: the segment, the more engaged of the user's snapshot in
  ``UserViews`` (from the interactions it recorded) and their token's; page type,
  geo bucket, device, 15-minute bucket of the edge's clock,
  recent hash for active and power users, variant; the TTL from ``ttl_for``. A browser
  gets a token at its user's first request, again at the first request of each later
  visit (no request for ``session_idle_s``) and when the one it holds has expired
  (``token_ttl_s``); the token carries what ``origin.ranking.history`` says at issue: the
  user's interactions of the last 24 hours, as its interactions key holds them (the last
  50, gone 24 hours after the last one). Here an edge sees every interaction of its users
  and forgets none of them, while the origin forgets a user after a day without one, so
  the token's segment is ``new`` whenever the edge's is: it would count for an edge whose
  ``UserViews`` dropped the user, or that never saw their feedback.
- **Lookup** by ``edge.serve.fill.lookup``: FRESH is a hit; REVALIDATE (the refresh window) is a
  hit and starts one background refresh of the key unless one is under way
  (``edge.cache.freshness.refresh_due``); STALE and GONE are misses (the origin never fails
  here, so stale-if-error never serves).
- **Origin calls**: a miss fills the key; one call per key at a time, as the coalescer
  runs them: a miss, a refresh or a pre-warm that finds the key's call in flight waits
  for it and calls nothing. Every call completes a fixed latency of simulated time after
  it started (0: at once), and its entry is stored then, as ``edge.serve.fill.fill`` builds it:
  filled then, the TTL computed when the call started, ``stale_until``
  ``stale_if_error_s`` later, the generation taken when the call started, tagged with
  its items.
- **Pre-warming** (layer 3) as ``edge.cache.prewarm.Prewarmer`` and ``edge.serve.fill.prewarm``
  do it,
  mirrored on the virtual clock (``Prewarmer`` sleeps on the event loop's clock):
  every request is remembered as its user's last (at most ``edge_user_views_max`` users);
  a feedback after which the user is power or active schedules a pre-warm unless the
  edge has no request of the user, one of theirs is pending, or the token bucket
  (``edge_prewarm_per_s`` a second, holding one second's worth) is empty.
  ``edge_settle_s`` + ``edge.app.PREWARM_MARGIN_S`` later it computes the key the last
  request would have then (``key_of``, with a ``new`` token segment, as
  ``edge.serve.fill.prewarm``); a FRESH or REVALIDATE entry there means already filled, else it
  fills the key (an origin call, or waits for the key's call in flight). The user's
  pre-warm stays pending until that call completes.

Interactions are recorded into ``UserViews`` as the edge's ``/v1/feedback`` does, and are
the origin's record of the user for the tokens. One edge per region
(``loadtests.traffic.REGION_ORIGINS``); a user always reaches their region's edge. Not
modelled: rate limits (a user's page views come at least 2 s apart, an edge gets a few a
second: far under the free tier's 10 a second per user and 10,000 per API key), origin
failures and degraded answers, requests with exclusions, the coalescer's follower
timeout (``edge_coalesce_wait_ms``, far over the simulated latency).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import httpx
import numpy as np
from pydantic import SecretStr

from benchmarks.replay_origin import SimOrigin
from benchmarks.traffic_model import HISTORY_S, INTERACTION, REGIONS, Event
from config.settings import Settings, configured_policy
from edge.cache.entry import CachedItem, Entry
from edge.cache.freshness import Freshness, refresh_due
from edge.cache.key import TIME_BUCKET_S, CacheKey, time_bucket
from edge.cache.store import MemoryEntryStore
from edge.node import PREWARM_MARGIN_S, Edge, applier_of, build_edge, ttl_policy
from edge.origins.client import OriginClient
from edge.ranking.user_view import UserViews
from edge.serve.fill import Keyed, key_of, lookup, shareable_request
from edge.serve.pool_answer import answer_here
from edge.serve.pool_fill import pool_key
from invalidation.ttl import TtlPolicy
from loadtests.traffic import SimUser, Traffic
from origin.ranking.history import Interaction, RankingHistory
from protocol.api import Explanation, ItemMetadata, PersonalizeRequest, RankedItem
from protocol.keys import INTERACTIONS_KEPT, USER_STATE_TTL_S
from protocol.segments import Segment, is_fine_grained
from resilience.token_bucket import TokenBucket
from sync.messages import Envelope, UserUpdate

TIMELINE_S = 600.0  # the hit ratio over time: per 10 minutes of the measured window
START_S = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the measured window starts on a bucket
# From an interaction accepted to its user's new model applied at the region's edge: a
# stream worker's micro-batch (100 ms at most) and the sync stream's hop (ours: see
# benchmarks.freshness and benchmarks.sync_propagation).
SYNC_DELAY_S = 0.25
USABLE = (Freshness.FRESH, Freshness.REVALIDATE)


class VirtualClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def origin_segment(interactions_ms: Sequence[int], now_s: float) -> Segment:
    """What ``origin.ranking.history`` says of a user at ``now_s`` (the segment a token issued
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
    return RankingHistory(interactions=newest_first).segment(now_ms)


def token_due(
    expires_at: float, last_request: float | None, now: float, visit_idle_s: float
) -> bool:
    """Whether a browser holding a token that expires at ``expires_at`` asks for a new one
    at a request at ``now``: it has expired, or the request starts a visit (none for
    ``visit_idle_s``)."""
    return expires_at <= now or last_request is None or now - last_request > visit_idle_s


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
        if held is None or token_due(held[1], last, now, self._visit_idle_s):
            issued = int(now)
            held = (origin_segment(self._interactions.get(user_id, ()), now), issued + self._ttl_s)
            self._held[user_id] = held
            self.issued += 1
        return held[0]


class Prewarms:
    """``edge.cache.prewarm.Prewarmer``'s bookkeeping on the virtual clock: the users' last
    requests, the users with a pre-warm pending, the token bucket. Its ``schedule`` counts
    into ``counts`` (None: not counted) what the edge's ``PrewarmCounters`` would."""

    def __init__(self, *, per_second: float, delay_s: float, max_users: int, now: float) -> None:
        self.per_second = per_second
        self.delay_s = delay_s
        self._max_users = max_users
        self._budget = TokenBucket(per_second, now) if per_second > 0 else None
        self._last: OrderedDict[str, PersonalizeRequest] = OrderedDict()
        self.pending: set[str] = set()
        # per user, the schedule of their current pre-warm: a job of an older one is void
        # (a later interaction pushed the pre-warm back, as the edge cancels its task)
        self.latest: dict[str, int] = {}

    def remember(self, body: PersonalizeRequest) -> None:
        last = self._last
        last[body.user_id] = body
        last.move_to_end(body.user_id)
        if len(last) > self._max_users:
            last.popitem(last=False)

    def could_schedule(self, user_id: str) -> bool:
        """False when ``schedule`` would do nothing whatever the budget."""
        return self._budget is not None and user_id in self._last

    def schedule(
        self, user_id: str, now: float, counts: Counter[str] | None
    ) -> PersonalizeRequest | None:
        """The last request to pre-warm from at ``now`` + ``delay_s``, or None when
        nothing was scheduled (no request, pre-warming off, over budget). A pending
        pre-warm is pushed back instead, without charging the budget again."""
        if self._budget is None or not self.could_schedule(user_id):
            return None
        self.latest[user_id] = self.latest.get(user_id, 0) + 1
        if user_id in self.pending:
            if counts is not None:
                counts["prewarm rescheduled"] += 1
            return self._last[user_id]
        if self._budget.take(now) > 0:
            if counts is not None:
                counts["prewarm over budget"] += 1
            return None
        if counts is not None:
            counts["prewarm scheduled"] += 1
        self.pending.add(user_id)
        return self._last[user_id]


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
    edge: Edge  # the real one: key_of and lookup run on it
    store: MemoryEntryStore  # edge.store (typed as the store it is, for its bytes)
    max_mb: int
    prewarms: Prewarms
    edge_users_mb: int  # the user table's budget
    # key -> when the origin call filling it completes (the coalescer's fetch in flight)
    inflight: dict[CacheKey, float] = field(default_factory=dict)
    # keys with a background refresh under way (edge.node.Edge._refreshing)
    refreshing: set[CacheKey] = field(default_factory=set)
    # generation -> kind ("refresh", "prewarm") of counted calls' entries no request read yet
    unread: dict[int, str] = field(default_factory=dict)
    peak_bytes: int = 0

    @property
    def views(self) -> UserViews:
        return self.edge.views


@dataclass(frozen=True, slots=True)
class Fill:
    """An origin call in flight: a miss's fill, a background refresh or a pre-warm."""

    node: SimEdge
    key: CacheKey
    ttl: float
    generation: int
    rule: str  # the TTL rule that set ttl (for the report)
    kind: str  # "fill", "refresh", "prewarm"
    counted: bool


@dataclass(frozen=True, slots=True)
class Prewarm:
    """A pre-warm: it starts when its delay is over; it is over (``done``, the user may
    be scheduled again) when the origin call it made or waited for completes."""

    node: SimEdge
    user_id: str
    body: PersonalizeRequest
    counted: bool
    done: bool = False
    schedule: int = 0  # Prewarms.latest when scheduled: an older one is void


@dataclass(frozen=True, slots=True)
class Synced:
    """A user's new model, published by the stream worker, reaching their region's edge."""

    node: SimEdge
    user_id: str
    version: int
    model: bytes


# The kinds of origin call, as ``Tally.events`` counts them: a miss's fill, a refresh
# ahead of expiry, a pre-warm (entries the origin ranks); a pool fill on a request's path,
# a pool's refresh in the background, a user's state fetched (ranking at the edge).
ORIGIN_CALLS = ("fill", "refresh", "prewarm", "pool fill", "pool refresh", "user state")


@dataclass
class Tally:
    requests: Counter[str] = field(default_factory=Counter)
    hits: Counter[str] = field(default_factory=Counter)
    misses: Counter[str] = field(default_factory=Counter)
    # origin calls by kind (fill, refresh, prewarm), refreshes started, entries read,
    # pre-warm outcomes, token segments
    events: Counter[str] = field(default_factory=Counter)
    # (bucket of TIMELINE_S since the measured window began, label) -> requests, hits; for
    # "all", "region:*" and "class:*" only, so that its size is bounded by the hours
    timeline_requests: Counter[tuple[int, str]] = field(default_factory=Counter)
    timeline_hits: Counter[tuple[int, str]] = field(default_factory=Counter)

    def count(self, labels: Iterable[str], hit: bool, at_s: float) -> None:
        """A request with ``labels`` at ``at_s`` (virtual seconds since the window began)."""
        bucket = int(at_s // TIMELINE_S)
        for label in labels:
            self.requests[label] += 1
            self.hits[label] += hit
            if label == "all" or (label.startswith(("region:", "class:")) and "/" not in label):
                self.timeline_requests[(bucket, label)] += 1
                self.timeline_hits[(bucket, label)] += hit

    def timeline(self, label: str) -> list[tuple[float, float]]:
        """``(bucket start in hours, hit ratio)`` for ``label``, in time order."""
        return [
            (bucket * TIMELINE_S / 3600, self.timeline_hits[(bucket, name)] / requests)
            for (bucket, name), requests in sorted(self.timeline_requests.items())
            if name == label and requests
        ]

    def ratio(self, label: str) -> float | None:
        requests = self.requests[label]
        return round(self.hits[label] / requests, 4) if requests else None

    @property
    def origin_calls(self) -> int:
        return sum(self.events[kind] for kind in ORIGIN_CALLS)

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
    """The edges, the origin calls and pre-warms under way, and what the report needs to
    say why a request missed."""

    users: Sequence[SimUser]
    edges: dict[str, SimEdge]
    clock: VirtualClock
    policy: TtlPolicy
    tokens: Tokens
    items: tuple[CachedItem, ...]
    stale_if_error_s: float
    latency_s: float
    rng: random.Random
    origin: SimOrigin
    tally: Tally = field(default_factory=Tally)
    # key -> (expires_at, the TTL rule that set it): an expired key from one never filled
    filled: dict[CacheKey, tuple[float, str]] = field(default_factory=dict)
    # (user, page type, bucket) -> the key of that user's last such request
    last_key: dict[tuple[str, str, int], CacheKey] = field(default_factory=dict)
    # pool keys filled once: a pool missing there again expired or was evicted
    pools_filled: set[CacheKey] = field(default_factory=set)
    # (when, sequence, what): origin calls completing, pre-warms starting and ending, users'
    # models reaching their edge
    pending: list[tuple[float, int, Fill | Prewarm | Synced]] = field(default_factory=list)
    _sequence: itertools.count[int] = field(default_factory=itertools.count)
    _sync_seq: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    tags: tuple[str, ...] = field(init=False)  # an entry's, as edge.fill.fill tags it

    def __post_init__(self) -> None:
        self.tags = tuple(item.item_id for item in self.items)

    async def aclose(self) -> None:
        for node in self.edges.values():
            await node.edge.origin.aclose()

    async def run(self, events: Iterable[Event]) -> None:
        for t, kind, index, item in events:
            await self.advance(START_S + t)
            self.origin.counting = t >= 0
            user = self.users[index]
            node = self.edges[user.region]
            if kind == INTERACTION:
                self.feedback(node, user.user_id, f"it-{item}", counted=t >= 0)
            else:
                body = PersonalizeRequest.model_validate(Traffic.personalize_body(user, self.rng))
                await self.request(node, user.activity, body, counted=t >= 0)
        self.tally.events.update(self.origin.calls)

    def at(self, when: float, what: Fill | Prewarm | Synced) -> None:
        heapq.heappush(self.pending, (when, next(self._sequence), what))

    async def advance(self, now: float) -> None:
        """Move the clock to ``now``: the origin calls that complete by then store their
        answers, and the pre-warms due by then run, in time order."""
        while self.pending and self.pending[0][0] <= now:
            when, _, what = heapq.heappop(self.pending)
            self.clock.now = when
            if isinstance(what, Fill):
                await self.complete(what)
            elif isinstance(what, Synced):
                await self.synced(what)
            elif what.done:
                what.node.prewarms.pending.discard(what.user_id)
            else:
                await self.prewarm(what)
        self.clock.now = now

    async def complete(self, call: Fill) -> None:
        done = self.clock()
        node = call.node
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
            audience=call.key.audience,
        )
        if await node.store.put(call.key, entry) and call.kind != "fill" and call.counted:
            node.unread[call.generation] = call.kind
        node.peak_bytes = max(node.peak_bytes, node.store.bytes)
        self.filled[call.key] = (done + call.ttl, call.rule)
        del node.inflight[call.key]
        node.refreshing.discard(call.key)

    async def synced(self, update: Synced) -> None:
        """The sync stream delivers the user's new model to their region's edge."""
        sync = update.node.edge.sync
        assert sync is not None
        message = UserUpdate(
            update.user_id,
            update.version,
            model=update.model,
            preferences=self.origin.no_preferences,
            preferences_version=0,
        )
        published_ms = int((self.clock() - SYNC_DELAY_S) * 1000)
        await sync.apply(Envelope(next(self._sync_seq), published_ms, message))

    def feedback(self, node: SimEdge, user_id: str, item_id: str, *, counted: bool) -> None:
        """``edge.serve.feedback.feedback`` once the origin accepted the interaction: recorded, and
        a
        pre-warm scheduled when the user is power or active after it (unless the edge
        ranks for itself); the stream worker's new model of the user reaches the edge
        ``SYNC_DELAY_S`` later."""
        now = self.clock()
        node.views.record(user_id, [item_id])
        self.tokens.record(user_id, now)
        version, model = self.origin.interacted(user_id)
        self.at(now + SYNC_DELAY_S, Synced(node, user_id, version, model))
        if node.edge.rank_at_edge:
            return  # edge.feedback: no pre-warm, the edge ranks the user's next request
        # The edge takes the snapshot first; checking first what needs none changes
        # nothing (neither has an effect) and spares a snapshot per interaction of the
        # two days before the window, when no request was remembered.
        prewarms = node.prewarms
        if not prewarms.could_schedule(user_id):
            return
        if not is_fine_grained(node.views.snapshot(user_id).segment):
            return
        counts = self.tally.events if counted else None
        body = prewarms.schedule(user_id, now, counts)
        if body is not None:
            job = Prewarm(node, user_id, body, counted, schedule=prewarms.latest[user_id])
            self.at(now + prewarms.delay_s, job)

    async def prewarm(self, job: Prewarm) -> None:
        """``edge.serve.fill.prewarm`` once the delay is over: fill the key the user's last request
        would have now, unless a usable entry is there."""
        node, now = job.node, self.clock()
        if job.schedule != node.prewarms.latest.get(job.user_id):
            return  # pushed back by a later interaction: its successor runs instead
        if shareable_request(job.body):  # always here: every request asks for 20 items
            keyed = key_of(node.edge, job.body, Segment.NEW, now)
            entry, state = await lookup(node.edge, keyed.key, now, job.user_id)
            if entry is None or state not in USABLE:
                since = node.views.snapshot(job.user_id).since_interaction_s
                rule = ttl_rule(keyed.segment, since, keyed.ttl, self.policy)
                if job.counted:
                    self.tally.events["prewarm filled"] += 1
                    if keyed.key not in node.inflight:
                        self.tally.events[f"prewarm ttl: {rule}"] += 1
                self.call_origin(
                    node, keyed.key, keyed.ttl, rule, kind="prewarm", counted=job.counted
                )
                done = Prewarm(node, job.user_id, job.body, job.counted, done=True)
                self.at(node.inflight[keyed.key], done)
                return
        node.prewarms.pending.discard(job.user_id)
        if job.counted:
            self.tally.events["prewarm already filled"] += 1

    async def request(
        self, node: SimEdge, activity: str, body: PersonalizeRequest, *, counted: bool
    ) -> None:
        """``edge.serve.personalize.personalize``'s key, lookup and origin calls for ``body``."""
        now = self.clock()
        keyed = key_of(node.edge, body, self.tokens.present(body.user_id, now), now)
        key, segment, ttl = keyed.key, keyed.segment, keyed.ttl
        user = node.views.snapshot(body.user_id)
        rule = ttl_rule(segment, user.since_interaction_s, ttl, self.policy)
        page = body.context.page_type.value
        count, exclude = body.constraints.count, frozenset(body.constraints.exclude_items)
        node.prewarms.remember(body)
        labels = (
            "all",
            f"segment:{segment}",
            f"class:{activity}",
            f"class:{activity}/segment:{segment}",
            f"page:{page}",
            f"region:{node.edge.region}",
        )
        if await self.ranked_here(node, body, keyed, labels, counted=counted):
            if counted and segment is not user.segment:
                self.tally.events["token segment"] += 1
            return
        entry, state = await lookup(node.edge, key, now, body.user_id)
        hit = entry is not None and state in USABLE and entry.select(count, exclude) is not None
        if entry is not None and hit:
            key_ends_at = time_bucket(now) + TIME_BUCKET_S
            if refresh_due(state, expires_at=entry.expires_at, key_ends_at=key_ends_at):
                self.refresh(node, key, ttl, rule, counted=counted)
            kind = node.unread.pop(entry.generation, None)
            if kind is not None:
                self.tally.events[f"{kind} read"] += 1
        else:
            cause = self.miss_cause(
                node, key, user_id=body.user_id, page=page, segment=segment, now=now
            )
            self.call_origin(node, key, ttl, rule, kind="fill", counted=counted)
            if counted:
                grain = "fine" if is_fine_grained(segment) else "coarse"
                self.tally.misses[f"{cause} ({grain})"] += 1
        self.last_key[(body.user_id, page, time_bucket(now))] = key
        if counted:
            if segment is not user.segment:
                self.tally.events["token segment"] += 1
            self.tally.count(labels, hit, now - START_S)

    async def ranked_here(
        self,
        node: SimEdge,
        body: PersonalizeRequest,
        keyed: Keyed,
        labels: tuple[str, ...],
        *,
        counted: bool,
    ) -> bool:
        """``edge.serve.pool_answer.answer_here`` for the request, the real one: True when the
        edge ranked it (counted), False when it takes the origin's path. Its pool fills and
        state fetches are origin calls on the request's path; the pool refreshes it starts
        run in the background at once, once the request is answered."""
        edge = node.edge
        if not edge.rank_at_edge:
            return False
        now = self.clock()
        pooled = pool_key(edge, keyed).key
        self.origin.on_request_path = True
        try:
            here = await answer_here(edge, body, keyed, now, may_fill=always)
        finally:
            self.origin.on_request_path = False
        if edge._background:
            await asyncio.gather(*list(edge._background))
        if here is None:
            return False
        if counted:
            self.tally.events["ranked at the edge"] += 1
            self.tally.count(labels, here.hit, now - START_S)
            if here.pool_filled:
                cause = (
                    "pool: expired or evicted before a refresh"
                    if pooled in self.pools_filled
                    else "pool: first of the segment's pool key"
                )
                self.tally.misses[cause] += 1
            elif here.state_fetched:
                self.tally.misses["user state: first request of the user ranked here"] += 1
        if here.pool_filled:
            self.pools_filled.add(pooled)
        return True

    def refresh(
        self, node: SimEdge, key: CacheKey, ttl: float, rule: str, *, counted: bool
    ) -> None:
        """``edge.serve.fill.refresh_in_background``: one refresh per key at a time."""
        if key in node.refreshing:
            return
        node.refreshing.add(key)
        if counted:
            self.tally.events["refreshes started"] += 1
        self.call_origin(node, key, ttl, rule, kind="refresh", counted=counted)

    def call_origin(
        self, node: SimEdge, key: CacheKey, ttl: float, rule: str, *, kind: str, counted: bool
    ) -> None:
        """Start a ``kind`` call filling ``key``, unless one is in flight: then wait for
        that one."""
        if key in node.inflight:
            return
        done = self.clock() + self.latency_s
        generation = node.store.next_generation()
        node.inflight[key] = done
        self.at(done, Fill(node, key, ttl, generation, rule, kind, counted))
        if counted:
            self.tally.events[kind] += 1

    def miss_cause(
        self, node: SimEdge, key: CacheKey, *, user_id: str, page: str, segment: Segment, now: float
    ) -> str:
        if key in node.inflight:
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


async def always() -> bool:
    """The replay's fill rate limit: none (it measures what the edge holds, not limits)."""
    return True


def replay_settings(settings: Settings) -> Settings:
    """``settings`` with an identity key: the replay checks no token, but a node needs one."""
    if settings.identity_key_list:
        return settings
    return settings.model_copy(update={"identity_keys": SecretStr("replay-identity-key-unused")})


def sim_edge(
    region: str, settings: Settings, clock: VirtualClock, origin_sim: SimOrigin, seed: int
) -> SimEdge:
    """A region's edge as ``edge.app.create_app`` builds it from ``settings``, on the
    virtual clock, with its sync applier; its origin client asks ``origin_sim`` (pool
    fills and users' states; the replay simulates the other origin calls); the token
    verifier is inert."""
    store = MemoryEntryStore(
        max_bytes=settings.edge_cache_max_mb * 2**20,
        clock=clock,
        generations=itertools.count(1).__next__,  # a seed replays them too
    )
    origin = OriginClient(
        "http://origin.invalid",
        timeout_s=settings.origin_timeout_s,
        transport=httpx.MockTransport(origin_sim.handle),
    )
    edge = build_edge(
        replay_settings(settings), region=region, store=store, origin=origin, clock=clock
    )
    edge.rng = np.random.default_rng(seed)
    edge.sync = applier_of(edge)
    prewarms = Prewarms(
        per_second=settings.edge_prewarm_per_s,
        delay_s=settings.edge_settle_s + PREWARM_MARGIN_S,
        max_users=settings.edge_user_views_max,
        now=clock(),
    )
    return SimEdge(edge, store, settings.edge_cache_max_mb, prewarms, settings.edge_user_models_mb)


def make_replay(
    users: Sequence[SimUser], settings: Settings, seed: int, origin_latency_ms: float
) -> Replay:
    """Edges configured by ``settings`` (pre-warming: ``edge_prewarm_per_s``); close
    with ``aclose``."""
    clock = VirtualClock(START_S - HISTORY_S)
    origin = SimOrigin(
        pool_size=settings.pool_size,
        fill_items=settings.edge_fill_items,
        dim=settings.embedding_dim,
        seed=seed,
        policy=configured_policy(settings).label,
    )
    return Replay(
        users=users,
        edges={
            region: sim_edge(region, settings, clock, origin, seed + n)
            for n, region in enumerate(REGIONS)
        },
        clock=clock,
        policy=ttl_policy(settings),
        tokens=Tokens(ttl_s=settings.token_ttl_s, visit_idle_s=settings.session_idle_s),
        items=fill_items(settings.edge_fill_items),
        stale_if_error_s=settings.edge_stale_if_error_s,
        latency_s=origin_latency_ms / 1000,
        rng=random.Random(seed + 2),
        origin=origin,
    )
