"""What an edge does with ``/v1/personalize``, free of any framework. In order:

1. **Who**: the bearer token, verified locally (401), the body validated (400), its
   ``user_id`` the token's (403).
2. **Key** (the segment cache key) from what the edge knows of the user (its feedback views; the
   token's segment when the edge has seen none), the request's context and the clock.
3. **Rate limit** (the API's rate-limit tiers): over the limit, a cached or the popular
   answer when one exists (``metadata.rate_limited``), else 429 with ``Retry-After``.
4. **Ranked here** (``edge.serve.pool_answer``): from the segment's pool and, for a known
   user, their own model; ``metadata.tier`` ``edge``. No lookup of the request's own key.
5. **Lookup** of the origin's ranking (``edge.cache.freshness``): a fresh entry is a HIT; in
   its refresh window it is a HIT and one background refresh starts
   (stale-while-revalidate).
6. **Miss**: one fill per key at a time (``edge.cache.coalesce``), followers wait for it,
   bounded. When the origin fails: this key's stale entry, else the previous time
   bucket's, else the region's popular list, all marked degraded (stale-if-error); a 503
   only when there is nothing at all.

Per-request fields (``request_id``, ``user_id``, ``count``, ``exclude_items``) are applied
after the lookup: a shared entry holds nobody's id or exclusions.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Mapping
from typing import Any

from decision_log.writer import DecisionLog
from edge.cache.decisions import POPULAR_POLICY, served
from edge.cache.entry import CachedItem, Entry
from edge.cache.freshness import Freshness, refresh_due
from edge.cache.http_cache import (
    HIT,
    MISS,
    STALE,
    age,
    cache_control,
    etag,
    items_digest,
    not_modified,
)
from edge.cache.key import (
    TIME_BUCKET_S,
    cache_key,
    time_bucket,
)
from edge.cache.render import new_request_id, personalize_body
from edge.exceptions import AudienceMismatch, OriginRejected, OriginUnavailable
from edge.identity import require_same_user
from edge.limits.rate_limit import Decision
from edge.node import Edge
from edge.serve.answer import JSON, Answer, origin_unavailable, over_the_limit, tier_of
from edge.serve.fill import (
    Keyed,
    coalesced_fill,
    fill,
    key_of,
    lookup,
    refresh_in_background,
    servable_to,
    shareable_request,
)
from edge.serve.pool_answer import answer_here
from protocol.api import PersonalizeRequest
from protocol.exceptions import ApiError
from protocol.identity import Claims
from protocol.tiers import FILL, PERSONALIZE, Tier
from web.problems import error_body
from web.request_body import parse_json

log = logging.getLogger(__name__)

# The answer to a personalize request whose If-None-Match names the answer it would get.
UNCHANGED = error_body(
    "precondition_failed",
    "the answer is unchanged: it is the one this header names (its ETag is sent)",
    field="If-None-Match",
)


async def personalize(edge: Edge, headers: Mapping[str, str], raw: bytes) -> Answer:
    started = time.perf_counter()
    claims = edge.verifier.claims(headers.get("authorization"))
    now = edge.clock()
    body: PersonalizeRequest = parse_json(PersonalizeRequest, raw, now=now)
    require_same_user(claims, body.user_id)
    keyed = key_of(edge, body, claims.segment, now)
    count, exclude = body.constraints.count, frozenset(body.constraints.exclude_items)
    edge.prewarmer.remember(body)

    tier = tier_of(claims)
    decision = await edge.check_limit(tier, PERSONALIZE, body.user_id, claims.api_key)
    if not decision.allowed:
        return await _rate_limited(
            edge, body, headers, keyed, decision, claims=claims, started=started, now=now
        )

    async def may_fill() -> bool:
        return (await check_fill(edge, tier, body.user_id, claims.api_key)).allowed

    here = await answer_here(edge, body, keyed, now, may_fill=may_fill)
    if here is not None:
        return _render(
            edge,
            body,
            headers,
            here.entry,
            started,
            x_cache=HIT if here.hit else MISS,
            now=now,
            items=here.items,
            ranked_here=True,
        )

    # The origin's ranking: the key's entry (only now: an answer ranked here needs none).
    entry, state = await lookup(edge, keyed.key, now, body.user_id)
    if entry is not None and state in (Freshness.FRESH, Freshness.REVALIDATE):
        items = entry.select(count, exclude)
        if items is not None:
            key_ends_at = time_bucket(now) + TIME_BUCKET_S
            if refresh_due(state, expires_at=entry.expires_at, key_ends_at=key_ends_at):
                refresh_in_background(edge, body, keyed)
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
                reuse_key=None if exclude else keyed.key.digest,
            )

    return await _miss(
        edge,
        body,
        headers,
        keyed=keyed,
        entry=entry,
        state=state,
        tier=tier,
        claims=claims,
        started=started,
        now=now,
    )


async def check_fill(edge: Edge, tier: Tier, user_id: str, api_key_id: str) -> Decision:
    """Takes one of the user's fills (the tier's fill rate), counting a refusal. A miss costs
    the origin work (a ranking, a pool fill or a state fetch): each user may cause only so
    many, so a client cannot make the edge fill for every request by varying it."""
    decision = await edge.check_limit(tier, FILL, user_id, api_key_id)
    if not decision.allowed:
        edge.counters.fills_limited += 1
    return decision


async def _rate_limited(
    edge: Edge,
    body: PersonalizeRequest,
    headers: Mapping[str, str],
    keyed: Keyed,
    decision: Decision,
    *,
    claims: Claims,
    started: float,
    now: float,
) -> Answer:
    """A request over its rate limit: the key's cached answer, else the region's popular
    list (``metadata.rate_limited``); else 429 with ``Retry-After``."""
    edge.counters.rate_limited += 1
    entry, state = await lookup(edge, keyed.key, now, body.user_id)
    fallback = entry if state is not Freshness.GONE else edge.popular.entry
    if fallback is None:
        raise over_the_limit(decision, claims)
    kind = STALE if fallback is not entry or state is Freshness.STALE else HIT
    return _render(edge, body, headers, fallback, started, x_cache=kind, rate_limited=True, now=now)


async def _miss(
    edge: Edge,
    body: PersonalizeRequest,
    headers: Mapping[str, str],
    *,
    keyed: Keyed,
    entry: Entry | None,
    state: Freshness,
    tier: Tier,
    claims: Claims,
    started: float,
    now: float,
) -> Answer:
    """A miss: one fill of the key by the origin, within the user's fill rate; when the
    rate or the origin refuses, what the edge has (``_fallback``); ``entry``: the key's,
    in ``state``, as looked up."""

    def degrade(otherwise: ApiError, *, rate_limited: bool = False) -> Awaitable[Answer]:
        return _fallback(
            edge,
            body,
            headers,
            keyed=keyed,
            looked_up=(entry, state),
            started=started,
            now=now,
            otherwise=otherwise,
            rate_limited=rate_limited,
        )

    fills = await check_fill(edge, tier, body.user_id, claims.api_key)
    if not fills.allowed:
        limited = ApiError(
            429,
            "rate_limited",
            f"over the fill rate limit of tier {claims.tier}: requests that miss the cache",
            retry_after_s=max(1, math.ceil(fills.retry_after_s)),
        )
        return await degrade(limited, rate_limited=True)
    try:
        if shareable_request(body):
            filled = await coalesced_fill(edge, body, keyed)
        else:
            filled = await fill(edge, body, keyed, generation=0)
    except (OriginRejected, OriginUnavailable) as exc:
        if isinstance(exc, OriginRejected) and exc.status < 500:
            return Answer(exc.status, exc.body, [("content-type", JSON)])
        # Down, or failed on this request (the HTTP API contract: a 500 falls back): what the
        # edge has.
        level = exc.log_level if isinstance(exc, OriginUnavailable) else logging.WARNING
        log.log(level, "origin could not fill a miss: %s", exc)
        return await degrade(origin_unavailable(edge, "no cached answer"))
    edge.counters.misses += 1
    return _render(edge, body, headers, filled, started, x_cache=MISS, now=now)


async def _fallback(
    edge: Edge,
    body: PersonalizeRequest,
    headers: Mapping[str, str],
    *,
    keyed: Keyed,
    looked_up: tuple[Entry | None, Freshness],
    started: float,
    now: float,
    otherwise: ApiError,
    rate_limited: bool = False,
) -> Answer:
    """When the origin cannot be asked: this key's stale entry, else the previous time
    bucket's, else the region's popular list, all degraded (stale-if-error); ``otherwise``
    when there is none of them."""
    entry, state = looked_up
    stale = entry if state is Freshness.STALE else None
    if stale is None:
        previous = cache_key(now_s=now - TIME_BUCKET_S, **keyed.parts)
        stale, _ = await lookup(edge, previous, now, body.user_id)
    if stale is not None:
        edge.counters.stale_served += 1
    elif edge.popular.entry is not None:
        edge.counters.popular_served += 1
        stale = edge.popular.entry
    else:
        raise otherwise
    return _render(
        edge, body, headers, stale, started, x_cache=STALE, now=now, rate_limited=rate_limited
    )


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
    ranked_here: bool = False,
) -> Answer:
    """The answer from ``entry``; ``reuse_key``: the entry is that key's stored entry and
    ``items`` its first ones, so their rendering may come from the render cache;
    ``ranked_here``: the edge ranked ``entry`` itself (``edge.serve.pool_answer``). Otherwise
    the origin ranked it: a fill on a miss, or what the cache, a stale entry or the popular
    list holds (the edge stores only the origin's rankings)."""
    if not servable_to(entry, body.user_id):
        # Every path above looks entries up for the user; this is the last line of defence.
        raise AudienceMismatch(f"{entry.audience!r} may not be served to {body.user_id!r}")
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
        # The condition failed on a POST: 412, not 304, which is GET's and HEAD's alone
        # (RFC 9110, 13.1.2). The caller's copy is current; the validators say which.
        edge.counters.not_modified += 1
        return Answer(412, UNCHANGED, [("content-type", JSON), *out_headers[1:]])
    metadata = _metadata(
        entry, started, x_cache, degraded, rate_limited=rate_limited, ranked_here=ranked_here
    )
    request_id = new_request_id()
    payload = personalize_body(
        request_id=request_id,
        user_id=body.user_id,
        items=rendered,
        explain=explain,
        metadata=metadata,
    )
    if edge.decisions is not None:
        _log_served(edge.decisions, edge, body, entry, items, request_id=request_id, now=now)
    return Answer(200, payload, out_headers)


def _metadata(
    entry: Entry,
    started: float,
    x_cache: str,
    degraded: bool,
    *,
    rate_limited: bool,
    ranked_here: bool,
) -> dict[str, Any]:
    """The answer's ``metadata``: how long it took since ``started``, who ranked it, how it
    was served."""
    metadata: dict[str, Any] = {
        "latency_ms": round((time.perf_counter() - started) * 1000, 3),
        # Who ranked the answer: the edge itself, or the origin (a fill on a miss, or
        # its ranking as the edge's cache holds it: ``cache_hit``).
        "tier": "edge" if ranked_here else "origin",
        "cache_hit": x_cache != MISS,
        "exploration_applied": entry.exploration_applied,
        "model_version": entry.model_version,
        # The policy that ranked the entry's items (the edge's, for one it ranked itself).
        "policy": entry.policy or POPULAR_POLICY,
        "degraded": degraded,
        # The same as ``tier`` (which once said "edge" for any cache hit), kept for
        # clients that read it.
        "ranked_by": "edge" if ranked_here else "origin",
    }
    if rate_limited:
        metadata["rate_limited"] = True
    return metadata


def _log_served(
    decisions: DecisionLog,
    edge: Edge,
    body: PersonalizeRequest,
    entry: Entry,
    items: list[CachedItem],
    *,
    request_id: str,
    now: float,
) -> None:
    """The decision of serving ``items`` of ``entry`` for ``body``, to the decision log."""
    decisions.log(
        served(
            entry,
            items,
            request_id=request_id,
            user_id=body.user_id,
            page=body.context.page_type.value,
            served_by=edge.served_by,
            at_ms=int(now * 1000),
        )
    )
