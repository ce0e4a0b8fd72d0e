"""One edge node: ``create_app`` assembles it and returns what uvicorn serves.

Personalize, feedback and explain are answered by ``edge.asgi``, ``edge.service`` and
``edge.explain`` (no framework on the hit path); health, readiness and the lifespan are
FastAPI's. The lifespan builds the edge: the entry store (in-process, or a PoP-local
Redis), the origin client (pooled connections, deadline, retries, circuit breaker), the
token verifier, the rate limiter, the cache of segment explanations, and the region's
popular list, refreshed in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
from fastapi import APIRouter, FastAPI, Request
from redis.asyncio import Redis
from starlette.responses import Response

from edge.asgi import EdgeFront
from edge.entry_store import EntryStore, MemoryEntryStore
from edge.explain_cache import ExplainCache
from edge.geo import default_bucket
from edge.identity import Verifier
from edge.metrics import CONTENT_TYPE, EdgeMetrics
from edge.origin_client import OriginClient
from edge.popular import PopularList
from edge.prewarm import Prewarmer
from edge.rate_limit import RateLimiter
from edge.redis_entry_store import RedisEntryStore
from edge.service import Edge
from edge.sync_apply import SyncApplier
from edge.user_view import UserViews
from invalidation.ttl import TtlPolicy
from perso.settings import ConfigError, Settings
from protocol import keys
from protocol.problems import install_error_handlers
from protocol.responses import readiness_response
from sync.cursor import CursorStore, MemoryCursor, RedisCursor
from sync.subscriber import SyncSubscriber

log = logging.getLogger(__name__)

router = APIRouter()

PREWARM_MARGIN_S = 0.25


def edge_of(request: Request) -> Edge:
    edge: Edge = request.app.state.edge
    return edge


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", response_class=Response)
async def readyz(request: Request) -> Response:
    edge = edge_of(request)
    origin_ok = await edge.origin.healthy()
    checks = {
        "origin": origin_ok,
        "circuit": edge.origin.breaker.state.value,
        "cache_entries": await edge.store.size(),
        "popular_items": len(edge.popular.entry.items) if edge.popular.entry else 0,
        "users": len(edge.views),
    }
    return readiness_response(origin_ok, checks, region=edge.region)


def ttl_policy(settings: Settings) -> TtlPolicy:
    """Algorithm 5's TTLs as configured (``PERSO_EDGE_TTL_*``, the session and settle
    windows)."""
    return TtlPolicy(
        power_s=settings.edge_ttl_power_s,
        active_s=settings.edge_ttl_active_s,
        casual_s=settings.edge_ttl_casual_s,
        session_cap_s=settings.edge_ttl_session_cap_s,
        session_idle_s=settings.session_idle_s,
        settle_s=settings.edge_settle_s,
    )


def _subscriber(
    settings: Settings,
    region: str,
    edge: Edge,
    store_redis: Redis | None,
    clock: Callable[[], float],
) -> tuple[SyncSubscriber | None, Redis | None]:
    """The region's sync subscriber (``REDIS_URL`` holds the ``edge_sync`` streams), or
    None without one: the edge then relies on TTLs alone. An in-process store starts empty,
    so its cursor does too (a fresh start); a PoP-local store keeps the cursor beside the
    entries, so that a restarted edge resumes, or learns it missed messages."""
    if not settings.redis_url:
        log.warning("no REDIS_URL: edge %s gets no sync messages (TTL only)", region)
        return None, None
    sync_redis = Redis.from_url(settings.redis_url, socket_timeout=5.0, socket_connect_timeout=2.0)
    cursor: CursorStore = MemoryCursor()
    if store_redis is not None:
        cursor = RedisCursor(store_redis, keys.edge_sync_cursor(settings.edge_name or region))
    applier = SyncApplier(edge.store, edge.staleness, clock=clock)
    edge.sync = applier
    subscriber = SyncSubscriber(
        sync_redis, region, applier.apply, cursor, clock, on_gap=applier.on_gap
    )
    return subscriber, sync_redis


@router.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    exposition: EdgeMetrics = request.app.state.metrics
    return Response(await exposition.exposition(), media_type=CONTENT_TYPE)


def create_app(
    settings: Settings,
    *,
    region: str,
    clock: Callable[[], float] = time.time,
    origin_transport: httpx.AsyncBaseTransport | None = None,
) -> EdgeFront:
    """The edge app; ``origin_transport`` replaces the network to the origin (tests run the
    real origin app in-process through ``httpx.ASGITransport``)."""
    identity_keys = settings.identity_key_list
    if not identity_keys:
        raise ConfigError("PERSO_IDENTITY_KEYS is required by an edge (it verifies user tokens)")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        token = settings.origin_token
        origin = OriginClient(
            settings.origin_url,
            timeout_s=settings.origin_timeout_s,
            token=token.get_secret_value() if token else None,
            transport=origin_transport,
        )
        redis: Redis | None = None
        store: EntryStore
        if settings.edge_store == "redis":
            assert settings.edge_store_url is not None  # Settings checks it
            redis = Redis.from_url(settings.edge_store_url, socket_timeout=0.5)
            store = RedisEntryStore(redis, prefix=keys.edge_entry_prefix(region))
        else:
            store = MemoryEntryStore(max_bytes=settings.edge_cache_max_mb * 2**20, clock=clock)
        popular = PopularList(origin, clock=clock)
        edge = Edge(
            region=region,
            default_geo=default_bucket(region),
            fill_items=settings.edge_fill_items,
            store=store,
            views=UserViews(max_users=settings.edge_user_views_max, clock=clock),
            origin=origin,
            ttl=ttl_policy(settings),
            clock=clock,
            verifier=Verifier(identity_keys, clock=clock),
            limiter=RateLimiter(clock=clock),
            popular=popular,
            stale_if_error_s=settings.edge_stale_if_error_s,
            coalesce_wait_s=settings.edge_coalesce_wait_ms / 1000,
            explanations=ExplainCache(
                ttl_s=settings.llm_cache_ttl_s, stale_s=settings.edge_stale_if_error_s
            ),
            prewarmer=Prewarmer(
                clock=clock,
                per_second=settings.edge_prewarm_per_s,
                # past the settle window: the fill is ranked from the updated embedding
                delay_s=settings.edge_settle_s + PREWARM_MARGIN_S,
                max_users=settings.edge_user_views_max,
            ),
        )
        app.state.edge = edge
        stop = asyncio.Event()
        subscriber, sync_redis = _subscriber(settings, region, edge, redis, clock)
        app.state.metrics = EdgeMetrics(edge, subscriber)
        await popular.refresh()
        loop = asyncio.get_running_loop()
        refresher = loop.create_task(popular.run(stop))
        syncing = loop.create_task(subscriber.run(stop)) if subscriber is not None else None
        # What start-up built lives as long as the process: keep the cyclic collector from
        # scanning it again and again on the hit path.
        gc.collect()
        gc.freeze()
        log.info("edge %s ready, origin %s, store %s", region, settings.origin_url, store)
        try:
            yield
        finally:
            stop.set()
            refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await refresher
            if syncing is not None:
                # cancelled: it finishes the batch in hand and saves its cursor first
                syncing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await syncing
            if sync_redis is not None:
                await sync_redis.aclose()
            await edge.aclose()
            await origin.aclose()
            if redis is not None:
                await redis.aclose()

    app = FastAPI(title=f"perso edge ({region})", version="0.1.0", lifespan=lifespan)
    install_error_handlers(app)
    app.include_router(router)
    return EdgeFront(app, max_body_bytes=settings.edge_max_body_bytes)
