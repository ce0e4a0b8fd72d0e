"""The edge's HTTP API: the same ``/v1/personalize`` and ``/v1/feedback`` as the origin.

A hit is a key computation, a dictionary lookup and a response; a miss asks the origin for
a fill (more items than asked, no exclusions, explanations included), stores it under the
key and serves the request from it. Feedback is forwarded and acknowledged only once the
origin has accepted it; the edge then remembers the interactions, so that a power user's
next request keys to a fresh entry.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
from fastapi import APIRouter, FastAPI, Request
from starlette.responses import Response

from edge.cache import CachedItem, EdgeCache, Entry
from edge.cache_key import cache_key, variant
from edge.exceptions import OriginRejected, OriginUnavailable
from edge.geo import default_bucket, geo_bucket
from edge.origin_client import OriginClient
from edge.render import personalize_body
from edge.user_view import UserViews
from invalidation.ttl import TtlPolicy, ttl_for
from perso.settings import Settings
from protocol.api import (
    MAX_COUNT,
    FeedbackRequest,
    FeedbackResponse,
    PersonalizeRequest,
    PersonalizeResponse,
)
from protocol.exceptions import ApiError
from protocol.problems import install_error_handlers
from protocol.responses import elapsed_ms, json_response, readiness_response
from protocol.segments import is_fine_grained

log = logging.getLogger(__name__)


@dataclass
class Edge:
    region: str
    default_geo: str
    fill_items: int
    cache: EdgeCache
    views: UserViews
    origin: OriginClient
    ttl: TtlPolicy
    clock: Callable[[], float]


router = APIRouter()


def edge_of(request: Request) -> Edge:
    edge: Edge = request.app.state.edge
    return edge


async def fill(
    edge: Edge, body: PersonalizeRequest, key: str, *, coarse: bool, ttl: float
) -> Entry:
    """Ask the origin for the shared answer of ``key`` and store it.

    A fill asks for more items than the request, without its exclusions and with
    explanations, so that it can serve every request of the key. A request that excludes
    more than one fill can hold is answered for itself instead (its exclusions go to the
    origin) and not stored; so is an answer the origin marks degraded.
    """
    constraints = body.constraints
    shareable = constraints.count + len(constraints.exclude_items) <= MAX_COUNT
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
    entry = Entry(
        items=tuple(CachedItem.of(item) for item in answer.items),
        complete=not shareable or len(answer.items) < want,
        model_version=answer.metadata.model_version,
        exploration_applied=answer.metadata.exploration_applied,
        expires_at=now + ttl,
        degraded=answer.metadata.degraded,
    )
    if shareable and not entry.degraded:
        edge.cache.put(key, entry)
    return entry


@router.post(
    "/v1/personalize", response_class=Response, responses={200: {"model": PersonalizeResponse}}
)
async def personalize(body: PersonalizeRequest, request: Request) -> Response:
    started = time.perf_counter()
    edge = edge_of(request)
    user = edge.views.snapshot(body.user_id)
    key = cache_key(
        user_id=body.user_id,
        page_type=body.context.page_type.value,
        segment=user.segment,
        geo=geo_bucket(body.context.geo, edge.default_geo),
        device=body.context.device.value,
        now_s=edge.clock(),
        recent_items=user.recent_items,
        variant_digest=variant(body),
    )
    count, exclude = body.constraints.count, frozenset(body.constraints.exclude_items)
    entry = edge.cache.get(key)
    items = entry.select(count, exclude) if entry is not None else None
    hit = items is not None
    if entry is None or items is None:
        ttl = ttl_for(user.segment, since_interaction_s=user.since_interaction_s, policy=edge.ttl)
        try:
            entry = await fill(edge, body, key, coarse=not is_fine_grained(user.segment), ttl=ttl)
        except OriginUnavailable as exc:
            log.warning("origin unavailable on miss: %s", exc)
            raise ApiError(
                503,
                "origin_unavailable",
                "no cached answer and the origin is unavailable; retry",
                retry_after_s=1,
            ) from exc
        except OriginRejected as exc:
            return Response(exc.body, status_code=exc.status, media_type="application/json")
        items = entry.select(count, exclude, partial=True)
    metadata = {
        "latency_ms": elapsed_ms(started),
        "tier": "edge" if hit else "origin",
        "cache_hit": hit,
        "exploration_applied": entry.exploration_applied,
        "model_version": entry.model_version,
        "degraded": entry.degraded,
    }
    body_bytes = personalize_body(
        request_id=str(uuid.uuid4()),
        user_id=body.user_id,
        items=items,
        explain=body.options.include_explanation,
        metadata=metadata,
    )
    return Response(body_bytes, media_type="application/json")


@router.post("/v1/feedback", response_class=Response, responses={200: {"model": FeedbackResponse}})
async def feedback(body: FeedbackRequest, request: Request) -> Response:
    started = time.perf_counter()
    edge = edge_of(request)
    try:
        accepted = await edge.origin.feedback(body.model_dump_json(exclude_none=True).encode())
    except OriginUnavailable as exc:
        log.warning("feedback not forwarded: %s", exc)
        raise ApiError(
            503, "origin_unavailable", "feedback not accepted; retry", retry_after_s=1
        ) from exc
    except OriginRejected as exc:
        return Response(exc.body, status_code=exc.status, media_type="application/json")
    edge.views.record(body.user_id, [item.item_id for item in body.feedback])
    return json_response(accepted.model_copy(update={"latency_ms": elapsed_ms(started)}))


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", response_class=Response)
async def readyz(request: Request) -> Response:
    edge = edge_of(request)
    origin_ok = await edge.origin.healthy()
    checks = {"origin": origin_ok, "cache_entries": len(edge.cache), "users": len(edge.views)}
    return readiness_response(origin_ok, checks, region=edge.region)


def create_app(
    settings: Settings,
    *,
    region: str,
    clock: Callable[[], float] = time.time,
    origin_transport: httpx.AsyncBaseTransport | None = None,
) -> FastAPI:
    """The edge app; ``origin_transport`` replaces the network to the origin (tests run the
    real origin app in-process through ``httpx.ASGITransport``)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        token = settings.origin_token
        origin = OriginClient(
            settings.origin_url,
            timeout_s=settings.origin_timeout_s,
            token=token.get_secret_value() if token else None,
            transport=origin_transport,
        )
        app.state.edge = Edge(
            region=region,
            default_geo=default_bucket(region),
            fill_items=settings.edge_fill_items,
            cache=EdgeCache(max_bytes=settings.edge_cache_max_mb * 2**20, clock=clock),
            views=UserViews(max_users=settings.edge_user_views_max, clock=clock),
            origin=origin,
            ttl=TtlPolicy(
                power_s=settings.edge_ttl_power_s,
                active_s=settings.edge_ttl_active_s,
                casual_s=settings.edge_ttl_casual_s,
                session_cap_s=settings.edge_ttl_session_cap_s,
                session_idle_s=settings.session_idle_s,
                settle_s=settings.edge_settle_s,
            ),
            clock=clock,
        )
        log.info("edge %s ready, origin %s", region, settings.origin_url)
        try:
            yield
        finally:
            await origin.aclose()

    app = FastAPI(title=f"perso edge ({region})", version="0.1.0", lifespan=lifespan)
    install_error_handlers(app)
    app.include_router(router)
    return app
