"""What an edge does with ``POST /v1/explain`` (the explain API), free of any
framework (``edge.http.asgi`` routes it beside personalize and feedback).

1. **Who**: the bearer token verified locally (401), the body validated (400), its
   ``user_id`` the token's (403), as for personalize.
2. **Shared or own**: new and casual users (the segments whose personalize entries are
   shared: ``service.known_segment``, ``protocol.segments.is_fine_grained``) get their
   segment's explanation, which the edge caches (``edge.cache.explain_cache``); active and power
   users get their own, forwarded to the origin and never cached.
3. **Rate limit** (the explain row of the API's rate-limit tiers): over it, the cached
   answer when there is one, else 429 with ``Retry-After``.
4. **Lookup**: a fresh entry is a HIT. On a miss one fill per key at a time
   (``edge.cache.coalesce``) asks the origin for the segment's explanation (``FILL_SCOPE_HEADER``,
   ``SEGMENT_HEADER``) and stores it only when the origin says it made it for that segment
   (``EXPLAIN_SCOPE_HEADER`` ``segment:<segment>``): anything else is one user's own.
5. **Origin failing** (down, timing out, 5xx, circuit open): the key's expired answer,
   ``X-Cache: STALE``, while the edge still holds it (stale-if-error), else 503 with
   ``Retry-After``. The edge has no catalog to write a template from, so a personal
   explanation has nothing else. The origin's 4xx (an unknown item: 404) are passed on.

The answer is the explain API's ``ExplainResponse`` with the edge's own ``latency_ms`` and an
``X-Cache`` header: HIT, MISS (asked of the origin, shared or own) or STALE.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from edge.cache.explain_cache import CachedExplanation, Usable, explain_key
from edge.cache.http_cache import HIT, MISS, STALE, age, cache_control
from edge.exceptions import OriginRejected, OriginUnavailable
from edge.identity import require_same_user
from edge.node import Edge
from edge.origins.answers import Explained
from edge.serve.answer import JSON, Answer, origin_unavailable, over_the_limit, tier_of
from edge.serve.fill import known_segment
from protocol.api import ExplainRequest, ExplainResponse, ItemExplanation
from protocol.segments import Segment, is_fine_grained
from protocol.tiers import EXPLAIN
from web.request_body import parse_json

log = logging.getLogger(__name__)


async def explain(edge: Edge, headers: Mapping[str, str], raw: bytes) -> Answer:
    started = time.perf_counter()
    claims = edge.verifier.claims(headers.get("authorization"))
    body: ExplainRequest = parse_json(ExplainRequest, raw, now=edge.clock())
    require_same_user(claims, body.user_id)
    counters = edge.explain_counters
    segment = known_segment(edge.views.snapshot(body.user_id).segment, claims.segment)
    now = edge.clock()
    key: str | None = None
    cached: tuple[CachedExplanation, Usable] | None = None
    if not is_fine_grained(segment):
        key = explain_key(
            region=edge.region,
            segment=segment,
            item_id=body.item_id,
            style=body.context.explanation_style,
            page_type=body.context.page_type,
        )
        cached = edge.explanations.get(key, now)

    decision = await edge.check_limit(tier_of(claims), EXPLAIN, body.user_id, claims.api_key)
    if not decision.allowed:
        counters.rate_limited += 1
        if cached is None:
            raise over_the_limit(decision, claims)
        return _from_cache(edge, *cached, started, now)
    if cached is not None and cached[1] is Usable.FRESH:
        return _from_cache(edge, *cached, started, now)

    try:
        if key is None:
            explained = await edge.origin.explain(body, fill_for=None)
        else:
            explained = await coalesced_fill(edge, body, key, segment)
    except OriginUnavailable as exc:
        log.log(exc.log_level, "origin unavailable for an explanation: %s", exc)
        if cached is not None:
            return _from_cache(edge, *cached, started, now)
        raise origin_unavailable(edge, "no cached explanation") from exc
    except OriginRejected as exc:
        return Answer(exc.status, exc.body, [("content-type", JSON)])
    if key is None:
        counters.forwarded += 1
    else:
        counters.misses += 1
    kept = key is not None and explained.segment is segment
    answer = explained.answer
    return _render(
        answer.item_id,
        answer.explanation,
        started,
        x_cache=MISS,
        fresh_for_s=edge.explanations.ttl_s if kept else 0.0,
    )


async def fill(edge: Edge, body: ExplainRequest, key: str, segment: Segment) -> Explained:
    """Ask the origin for ``segment``'s explanation; keep it when it is that."""
    explained = await edge.origin.explain(body, fill_for=segment)
    if explained.segment is segment:
        edge.explanations.put(key, body.item_id, explained.answer.explanation, edge.clock())
    return explained


async def coalesced_fill(edge: Edge, body: ExplainRequest, key: str, segment: Segment) -> Explained:
    """``fill`` once per key at a time; the followers share the leader's answer only when it
    is the segment's (an origin that answered for the leader alone answers each follower)."""
    explained, led = await edge.explain_coalescer.run(
        key, lambda: fill(edge, body, key, segment), wait_s=edge.coalesce_wait_s
    )
    if led or explained.segment is segment:
        return explained
    return await fill(edge, body, key, segment)


def _from_cache(
    edge: Edge, entry: CachedExplanation, usable: Usable, started: float, now: float
) -> Answer:
    if usable is Usable.FRESH:
        edge.explain_counters.hits += 1
    else:
        edge.explain_counters.stale += 1
    answer = _render(
        entry.item_id,
        entry.explanation,
        started,
        x_cache=HIT if usable is Usable.FRESH else STALE,
        fresh_for_s=entry.expires_at - now,
    )
    answer.headers.append(("age", age(now, entry.filled_at)))
    return answer


def _render(
    item_id: str,
    explanation: ItemExplanation,
    started: float,
    *,
    x_cache: str,
    fresh_for_s: float,
) -> Answer:
    latency_ms = round((time.perf_counter() - started) * 1000, 3)
    body = ExplainResponse(item_id=item_id, explanation=explanation, latency_ms=latency_ms)
    headers = [
        ("content-type", JSON),
        ("cache-control", cache_control(fresh_for_s=fresh_for_s, degraded=x_cache == STALE)),
        ("vary", "Authorization"),
        ("x-cache", x_cache),
    ]
    return Answer(200, body.model_dump_json().encode(), headers)
