"""What an edge does with ``/v1/personalize`` and ``/v1/feedback``, free of any framework.

Personalize, in order:

1. **Who**: the bearer token, verified locally (401), the body validated (400), its
   ``user_id`` the token's (403).
2. **Key** (Algorithm 5) from what the edge knows of the user (its feedback views; the
   token's segment when the edge has seen none), the request's context and the clock.
3. **Rate limit** (seed 001 tiers): over the limit, a cached or the popular answer when one
   exists (``metadata.rate_limited``), else 429 with ``Retry-After``.
4. **Lookup** (``edge.freshness``): a fresh entry is a HIT; in its refresh window it is a
   HIT and one background refresh starts (stale-while-revalidate).
5. **Miss**: one fill per key at a time (``edge.coalesce``), followers wait for it,
   bounded. When the origin fails: this key's stale entry, else the previous time
   bucket's, else the region's popular list, all marked degraded (stale-if-error); a 503
   only when there is nothing at all.

Per-request fields (``request_id``, ``user_id``, ``count``, ``exclude_items``) are applied
after the lookup: a shared entry holds nobody's id or exclusions.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from edge.cache import CachedItem, Entry
from edge.cache_key import TIME_BUCKET_S, cache_key, time_bucket, variant
from edge.coalesce import Coalescer
from edge.entry_store import EntryStore
from edge.exceptions import OriginRejected, OriginUnavailable
from edge.explain_cache import ExplainCache, ExplainCounters
from edge.freshness import Freshness, freshness, refresh_due
from edge.geo import geo_bucket
from edge.http_cache import (
    HIT,
    MISS,
    STALE,
    age,
    cache_control,
    etag,
    items_digest,
    not_modified,
)
from edge.identity import Verifier, require_same_user
from edge.origin_client import Explained, OriginClient
from edge.popular import PopularList
from edge.prewarm import Prewarmer
from edge.rate_limit import Decision, RateLimiter
from edge.render import RenderCache, new_request_id, personalize_body
from edge.sync_apply import Staleness, SyncApplier
from edge.user_view import UserViews
from invalidation.rules import item_tag, segment_tag, user_tag
from invalidation.ttl import TtlPolicy, ttl_for
from protocol.api import MAX_COUNT, FeedbackRequest, PersonalizeRequest
from protocol.exceptions import ApiError
from protocol.identity import Claims
from protocol.problems import validation_problems
from protocol.segments import Segment, is_fine_grained
from protocol.tiers import FEEDBACK, PERSONALIZE, Tier

log = logging.getLogger(__name__)

JSON = "application/json"


@dataclass
class Answer:
    """An HTTP answer, independent of the server that sends it."""

    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class EdgeCounters:
    hits: int = 0
    misses: int = 0
    stale_served: int = 0
    popular_served: int = 0
    rate_limited: int = 0
    revalidations: int = 0
    not_modified: int = 0


@dataclass
class Edge:
    region: str
    default_geo: str
    fill_items: int
    store: EntryStore
    views: UserViews
    origin: OriginClient
    ttl: TtlPolicy
    clock: Callable[[], float]
    verifier: Verifier
    limiter: RateLimiter
    popular: PopularList
    stale_if_error_s: float
    coalesce_wait_s: float
    coalescer: Coalescer[Entry] = field(default_factory=Coalescer)
    counters: EdgeCounters = field(default_factory=EdgeCounters)
    staleness: Staleness = field(default_factory=Staleness)
    sync: SyncApplier | None = None  # set when the edge subscribes to its region's stream
    prewarmer: Prewarmer = field(
        default_factory=lambda: Prewarmer(clock=time.time, per_second=0, delay_s=0)
    )
    render_cache: RenderCache = field(default_factory=RenderCache)
    # /v1/explain (edge.explain): segment explanations, their fills, how answers were served
    explanations: ExplainCache = field(
        default_factory=lambda: ExplainCache(ttl_s=3600.0, stale_s=3600.0)
    )
    explain_coalescer: Coalescer[Explained] = field(default_factory=Coalescer)
    explain_counters: ExplainCounters = field(default_factory=ExplainCounters)
    _refreshing: set[str] = field(default_factory=set)
    _background: set[asyncio.Task[None]] = field(default_factory=set)

    async def aclose(self) -> None:
        await self.prewarmer.aclose()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)


def parse(model: type[Any], body: bytes) -> Any:
    """``model`` from a JSON body; a 400 naming every bad field otherwise."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        problems = validation_problems(exc.errors())
        first = problems[0]
        raise ApiError(400, "invalid_request", first["reason"], field=first["field"]) from exc


def over_the_limit(decision: Decision, claims: Claims) -> ApiError:
    """The 429 of a refused request, with the wait its bucket asks for."""
    return ApiError(
        429,
        "rate_limited",
        f"over the {decision.scope} rate limit of tier {claims.tier}",
        retry_after_s=max(1, math.ceil(decision.retry_after_s)),
    )


def origin_unavailable(edge: Edge, what: str) -> ApiError:
    """The 503 of a request the edge can answer neither from its cache nor through the
    origin; ``Retry-After`` is when the circuit lets a call through again."""
    return ApiError(
        503,
        "origin_unavailable",
        f"{what} and the origin is unavailable; retry",
        retry_after_s=max(1, math.ceil(edge.origin.breaker.retry_after_s())),
    )


def tier_of(claims: Claims) -> Tier:
    try:
        return Tier(claims.tier)
    except ValueError:
        return Tier.FREE  # a tier this edge does not know gets the smallest limits


async def fill(
    edge: Edge,
    body: PersonalizeRequest,
    key: str,
    *,
    segment: Segment,
    coarse: bool,
    ttl: float,
    generation: int,
) -> Entry:
    """Ask the origin for the shared answer of ``key`` and store it.

    A fill asks for more items than the request, without its exclusions and with
    explanations, so that it can serve every request of the key. A request that excludes
    more than one fill can hold is answered for itself instead (its exclusions go to the
    origin) and not stored; so is an answer the origin marks degraded. The entry is tagged
    with its items, its segment and, when filled for one user, the user (for purges).
    """
    constraints = body.constraints
    shareable = shareable_request(body)
    if shareable:
        want = max(edge.fill_items, constraints.count + len(constraints.exclude_items))
        constraints = constraints.model_copy(update={"count": want, "exclude_items": []})
    else:
        want = constraints.count
    fill_request = body.model_copy(
        update={
            "constraints": constraints,
            "options": body.options.model_copy(update={"include_explanation": True}),
        }
    )
    answer = await edge.origin.personalize(fill_request, segment_scope=coarse)
    now = edge.clock()
    items = tuple(CachedItem.of(item) for item in answer.items)
    entry = Entry(
        items=items,
        complete=not shareable or len(answer.items) < want,
        model_version=answer.metadata.model_version,
        exploration_applied=answer.metadata.exploration_applied,
        filled_at=now,
        expires_at=now + ttl,
        stale_until=now + ttl + edge.stale_if_error_s,
        degraded=answer.metadata.degraded,
        generation=generation,
        tags=(
            *(item_tag(item.item_id) for item in items),
            segment_tag(segment.value),
            *(() if coarse else (user_tag(body.user_id),)),
        ),
    )
    if shareable and not entry.degraded:
        await edge.store.put(key, entry)
    return entry


def shareable_request(body: PersonalizeRequest) -> bool:
    constraints = body.constraints
    return constraints.count + len(constraints.exclude_items) <= MAX_COUNT


async def coalesced_fill(edge: Edge, body: PersonalizeRequest, keyed: Keyed) -> Entry:
    """``fill`` once per key at a time (followers wait for it, bounded); stamped with its
    generation when it starts, so that a slower, older fill never replaces a newer one."""
    generation = edge.store.next_generation()
    entry, _ = await edge.coalescer.run(
        keyed.key,
        lambda: fill(
            edge,
            body,
            keyed.key,
            segment=keyed.segment,
            coarse=keyed.coarse,
            ttl=keyed.ttl,
            generation=generation,
        ),
        wait_s=edge.coalesce_wait_s,
    )
    return entry


def _refresh_in_background(edge: Edge, body: PersonalizeRequest, keyed: Keyed) -> None:
    if keyed.key in edge._refreshing:
        return
    edge._refreshing.add(keyed.key)
    edge.counters.revalidations += 1

    async def refresh() -> None:
        try:
            await coalesced_fill(edge, body, keyed)
        except (OriginUnavailable, OriginRejected) as exc:
            log.info("background refresh failed, entry kept: %s", exc)
        except Exception:
            log.exception("background refresh failed")
        finally:
            edge._refreshing.discard(keyed.key)

    task = asyncio.get_running_loop().create_task(refresh())
    edge._background.add(task)
    task.add_done_callback(edge._background.discard)


@dataclass(frozen=True)
class Keyed:
    """Where a request's answer lives, and how long a fill of it may be kept."""

    key: str
    parts: dict[str, Any]  # cache_key's arguments but the time
    segment: Segment
    coarse: bool  # a segment-wide entry (new, casual) rather than the user's own
    ttl: float


def known_segment(seen: Segment, token_segment: Segment) -> Segment:
    """The user's segment: from the feedback the edge saw of them, their token's when it saw
    none."""
    return seen if seen is not Segment.NEW else token_segment


def key_of(edge: Edge, body: PersonalizeRequest, token_segment: Segment, now: float) -> Keyed:
    """Algorithm 5 for ``body``: the segment from what the edge saw of the user (their
    token's when it saw nothing), their last items, the request's context."""
    user = edge.views.snapshot(body.user_id)
    segment = known_segment(user.segment, token_segment)
    parts: dict[str, Any] = {
        "user_id": body.user_id,
        "page_type": body.context.page_type.value,
        "segment": segment,
        "geo": geo_bucket(body.context.geo, edge.default_geo),
        "device": body.context.device.value,
        "recent_items": user.recent_items,
        "variant_digest": variant(body),
    }
    ttl = ttl_for(segment, since_interaction_s=user.since_interaction_s, policy=edge.ttl)
    return Keyed(cache_key(now_s=now, **parts), parts, segment, not is_fine_grained(segment), ttl)


async def lookup(edge: Edge, key: str, now: float) -> tuple[Entry | None, Freshness]:
    """The key's entry and how it may be used now (soft purges make it stale)."""
    entry = await edge.store.get(key)
    if entry is None:
        return None, Freshness.GONE
    state = freshness(
        now, filled_at=entry.filled_at, expires_at=entry.expires_at, stale_until=entry.stale_until
    )
    if state is not Freshness.GONE and edge.staleness.is_stale(entry):
        state = Freshness.STALE  # soft-purged: a model epoch, a gap, a soft tag purge
    return entry, state


async def personalize(edge: Edge, headers: Mapping[str, str], raw: bytes) -> Answer:
    started = time.perf_counter()
    claims = edge.verifier.claims(headers.get("authorization"))
    body: PersonalizeRequest = parse(PersonalizeRequest, raw)
    require_same_user(claims, body.user_id)
    now = edge.clock()
    keyed = key_of(edge, body, claims.segment, now)
    key, segment, coarse, ttl = keyed.key, keyed.segment, keyed.coarse, keyed.ttl
    count, exclude = body.constraints.count, frozenset(body.constraints.exclude_items)
    edge.prewarmer.remember(body)

    entry, state = await lookup(edge, key, now)

    decision = edge.limiter.check(tier_of(claims), PERSONALIZE, body.user_id, claims.api_key)
    if not decision.allowed:
        edge.counters.rate_limited += 1
        fallback = entry if state is not Freshness.GONE else edge.popular.entry
        if fallback is None:
            raise over_the_limit(decision, claims)
        kind = STALE if fallback is not entry or state is Freshness.STALE else HIT
        return _render(
            edge, body, headers, fallback, started, x_cache=kind, rate_limited=True, now=now
        )

    if entry is not None and state in (Freshness.FRESH, Freshness.REVALIDATE):
        items = entry.select(count, exclude)
        if items is not None:
            key_ends_at = time_bucket(now) + TIME_BUCKET_S
            if refresh_due(state, expires_at=entry.expires_at, key_ends_at=key_ends_at):
                _refresh_in_background(edge, body, keyed)
            edge.counters.hits += 1
            return _render(
                edge,
                body,
                headers,
                entry,
                started,
                x_cache=HIT,
                now=now,
                items=items,
                reuse_key=None if exclude else key,
            )

    try:
        if shareable_request(body):
            filled = await coalesced_fill(edge, body, keyed)
        else:
            filled = await fill(
                edge, body, key, segment=segment, coarse=coarse, ttl=ttl, generation=0
            )
    except OriginUnavailable as exc:
        log.warning("origin unavailable on miss: %s", exc)
        stale = entry if state is Freshness.STALE else None
        if stale is None:
            previous = cache_key(now_s=now - TIME_BUCKET_S, **keyed.parts)
            stale = await edge.store.get(previous)
        if stale is not None:
            edge.counters.stale_served += 1
            return _render(edge, body, headers, stale, started, x_cache=STALE, now=now)
        if edge.popular.entry is not None:
            edge.counters.popular_served += 1
            return _render(edge, body, headers, edge.popular.entry, started, x_cache=STALE, now=now)
        raise origin_unavailable(edge, "no cached answer") from exc
    except OriginRejected as exc:
        return Answer(exc.status, exc.body, [("content-type", JSON)])
    edge.counters.misses += 1
    return _render(edge, body, headers, filled, started, x_cache=MISS, now=now)


def _render(
    edge: Edge,
    body: PersonalizeRequest,
    headers: Mapping[str, str],
    entry: Entry,
    started: float,
    *,
    x_cache: str,
    now: float,
    items: list[CachedItem] | None = None,
    rate_limited: bool = False,
    reuse_key: str | None = None,
) -> Answer:
    """The answer from ``entry``; ``reuse_key``: the entry is that key's stored entry and
    ``items`` its first ones, so their rendering may come from the render cache."""
    if items is None:
        items = entry.select(body.constraints.count, body.constraints.exclude_items, partial=True)
    degraded = entry.degraded or x_cache == STALE
    explain = body.options.include_explanation
    rendered: bytes | list[CachedItem]
    if reuse_key is not None:
        rendered, digest = edge.render_cache.get(
            reuse_key, entry.generation, items, explain=explain
        )
    else:
        rendered, digest = items, items_digest(item.item_id for item in items)
    tag = etag(
        user_id=body.user_id, model_version=entry.model_version, items=digest, explain=explain
    )
    out_headers = [
        ("content-type", JSON),
        ("etag", tag),
        ("cache-control", cache_control(fresh_for_s=entry.expires_at - now, degraded=degraded)),
        ("vary", "Authorization"),
        ("age", age(now, entry.filled_at)),
        ("x-cache", x_cache),
    ]
    if not_modified(headers.get("if-none-match"), tag):
        edge.counters.not_modified += 1
        return Answer(304, b"", out_headers[1:])
    metadata: dict[str, Any] = {
        "latency_ms": round((time.perf_counter() - started) * 1000, 3),
        "tier": "origin" if x_cache == MISS else "edge",
        "cache_hit": x_cache != MISS,
        "exploration_applied": entry.exploration_applied,
        "model_version": entry.model_version,
        "degraded": degraded,
    }
    if rate_limited:
        metadata["rate_limited"] = True
    payload = personalize_body(
        request_id=new_request_id(),
        user_id=body.user_id,
        items=rendered,
        explain=explain,
        metadata=metadata,
    )
    return Answer(200, payload, out_headers)


async def prewarm(edge: Edge, body: PersonalizeRequest) -> bool:
    """Fill the key ``body`` would have now, unless it is already fresh (``edge.prewarm``).
    Runs after the settle window, so the fill is ranked from the updated embedding."""
    if not shareable_request(body):
        return False
    now = edge.clock()
    keyed = key_of(edge, body, Segment.NEW, now)
    entry, state = await lookup(edge, keyed.key, now)
    if entry is not None and state in (Freshness.FRESH, Freshness.REVALIDATE):
        return False
    await coalesced_fill(edge, body, keyed)
    return True


async def feedback(edge: Edge, headers: Mapping[str, str], raw: bytes) -> Answer:
    started = time.perf_counter()
    claims = edge.verifier.claims(headers.get("authorization"))
    body: FeedbackRequest = parse(FeedbackRequest, raw)
    require_same_user(claims, body.user_id)
    decision = edge.limiter.check(tier_of(claims), FEEDBACK, body.user_id, claims.api_key)
    if not decision.allowed:
        edge.counters.rate_limited += 1
        raise over_the_limit(decision, claims)
    try:
        accepted = await edge.origin.feedback(body.model_dump_json(exclude_none=True).encode())
    except OriginUnavailable as exc:
        log.warning("feedback not forwarded: %s", exc)
        raise ApiError(
            503, "origin_unavailable", "feedback not accepted; retry", retry_after_s=1
        ) from exc
    except OriginRejected as exc:
        return Answer(exc.status, exc.body, [("content-type", JSON)])
    edge.views.record(body.user_id, [item.item_id for item in body.feedback])
    if is_fine_grained(edge.views.snapshot(body.user_id).segment):
        edge.prewarmer.schedule(body.user_id, lambda last: prewarm(edge, last))
    latency = round((time.perf_counter() - started) * 1000, 3)
    payload = accepted.model_copy(update={"latency_ms": latency}).model_dump_json().encode()
    return Answer(200, payload, [("content-type", JSON)])
