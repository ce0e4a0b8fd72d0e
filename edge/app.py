"""One edge node: ``create_app`` assembles it and returns what uvicorn serves.

Personalize, feedback and explain are answered by ``edge.http.asgi`` with
``edge.serve.personalize``, ``edge.serve.feedback`` and ``edge.serve.explain`` (no framework on
the hit path); health, readiness, dependencies, metrics and the internal routes
(``edge.http.held_state``, service token only) are FastAPI's; the storefront's page and the
demo token route (when on) are ``edge.http.static``'s and ``edge.http.demo_tokens``'. The
lifespan makes the entry store (in-process, or a PoP-local Redis, where the PoP's processes
then also share their rate limits and fill leases) and the client of its origins (pooled
connections, deadline, retries on another origin, a circuit breaker and outlier ejection per
origin), builds the node around them (``edge.node.build_edge``), and runs the region's popular
list, the origins' health checks and the sync subscriber in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI, Request
from starlette.responses import Response
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from config.settings import ConfigError, Settings
from config.tls import client_verify
from coordination.registry import Registration
from decision_log.writer import DecisionLog, configured_log
from edge.cache.redis_store import RedisEntryStore
from edge.cache.store import EntryStore, MemoryEntryStore
from edge.exceptions import OriginRejected, OriginUnavailable
from edge.http import dependencies
from edge.http.asgi import EdgeFront
from edge.http.demo_tokens import DEMO_TOKEN_PATH, token_route
from edge.http.held_state import held_state_router
from edge.http.metrics import CONTENT_TYPE, EdgeMetrics
from edge.http.static import StaticSite
from edge.node import Edge, applier_of, build_edge
from edge.origins.client import OriginClient, Transports
from edge.origins.rotation import EjectionRules
from edge.ranking.shadow import evaluation_of
from edge.serve.answer import Route
from protocol import keys
from redis_client.client import RedisClient, connect, ready
from sync.cursor import CursorStore, MemoryCursor, RedisCursor
from sync.subscriber import SyncSubscriber
from web.health import (
    DEPENDENCIES_RESPONSES,
    METRICS_RESPONSES,
    READINESS_RESPONSES,
    dependencies_response,
)
from web.problems import install_error_handlers
from web.responses import readiness_response

log = logging.getLogger(__name__)

router = APIRouter()


def edge_of(request: Request) -> Edge:
    edge: Edge = request.app.state.edge
    return edge


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", response_class=Response, responses=READINESS_RESPONSES)
async def readyz(request: Request) -> Response:
    """Ready means "this edge can answer" (``edge.http.dependencies``): it has its popular list
    to fall back on, or can reach the origin. Never 503 merely because the origin is down."""
    edge = edge_of(request)
    popular = len(edge.popular.entry.items) if edge.popular.entry else 0
    # The origin is asked only when the edge has nothing of its own to serve.
    origin_up = popular > 0 or await edge.origin.healthy()
    checks = {"popular_items": popular, "origin_reachable_or_not_needed": origin_up}
    # Either way the edge can answer: from its popular list, or by asking the origin.
    return readiness_response(origin_up, checks, region=edge.region)


@router.get("/dependencies", response_class=Response, responses=DEPENDENCIES_RESPONSES)
async def dependencies_of(request: Request) -> Response:
    """Each dependency's state now (origin, store, sync stream); always 200."""
    edge = edge_of(request)
    found = await dependencies.check(edge, request.app.state.subscriber)
    return dependencies_response(found, region=edge.region)


def _item_vectors(edge: Edge, stop: asyncio.Event) -> list[asyncio.Task[None]]:
    """The catalog's vectors for the users' own candidates, read in the background (until
    loaded, users are ranked from their segments' pools alone); none when not wanted."""
    own = edge.own_candidates
    return [] if own is None else [asyncio.create_task(own.vectors.run(stop))]


async def _before_serving(edge: Edge) -> None:
    """The region's popular list, and the policy the origin ranks by, adopted before the
    first request (an edge that starts after a promotion would otherwise rank by the
    configured one until the next epoch); with the origin unreachable, the configured one,
    and the first pool filled under another asks again (``Edge.check_policy_soon``)."""
    await edge.popular.refresh()
    try:
        await edge.read_live_policy()
    except (OriginUnavailable, OriginRejected) as exc:
        log.warning("the origin's live policy not read at start, the configured one: %s", exc)


def _feedback_spool(edge: Edge, stop: asyncio.Event) -> list[asyncio.Task[None]]:
    """What hands held feedback on to the origin (``edge.origins.feedback_spool``): what
    this process holds and what gone processes left; none without a spool."""
    spool = edge.feedback_spool
    return [] if spool is None else [asyncio.create_task(spool.run(stop))]


def _subscriber(
    settings: Settings,
    region: str,
    edge: Edge,
    store_redis: RedisClient | None,
    clock: Callable[[], float],
) -> tuple[SyncSubscriber | None, RedisClient | None]:
    """The region's sync subscriber (``REDIS_URL`` holds the ``edge_sync`` streams), or
    None without one: the edge then relies on TTLs alone. An in-process store starts empty,
    so its cursor does too (a fresh start); a PoP-local store keeps the cursor beside the
    entries, so that a restarted edge resumes, or learns it missed messages."""
    if not settings.redis_url:
        log.warning("no REDIS_URL: edge %s gets no sync messages (TTL only)", region)
        return None, None
    sync_redis = connect(settings.redis_url, socket_timeout=5.0, socket_connect_timeout=2.0)
    cursor: CursorStore = MemoryCursor()
    if store_redis is not None:
        cursor = RedisCursor(store_redis, keys.edge_sync_cursor(settings.edge_name or region))
    applier = applier_of(edge)
    edge.sync = applier
    subscriber = SyncSubscriber(
        sync_redis, region, applier.apply, cursor, clock, on_gap=applier.on_gap
    )
    return subscriber, sync_redis


def _origin_client(settings: Settings, transport: Transports | None) -> OriginClient:
    """The client of the edge's origins (``PERSO_ORIGIN_URLS``, else ``PERSO_ORIGIN_URL``),
    with this edge's service token (its own, ``PERSO_EDGE_SERVICE_TOKEN``, else the shared
    ``PERSO_ORIGIN_TOKEN``), the calls' budgets and the ejection rules."""
    token = settings.edge_service_token or settings.origin_token
    return OriginClient(
        settings.edge_origin_urls,
        timeout_s=settings.origin_timeout_s,
        feedback_timeout_s=settings.edge_feedback_timeout_ms / 1000,
        token=token.get_secret_value() if token else None,
        transport=transport,
        ejection=EjectionRules(
            after=settings.origin_eject_after,
            base_s=settings.origin_eject_base_s,
            max_s=settings.origin_eject_max_s,
        ),
        verify=client_verify(settings),
    )


def _entry_store(
    settings: Settings, region: str, clock: Callable[[], float]
) -> tuple[EntryStore, RedisClient | None]:
    """Where entries live (``PERSO_EDGE_STORE``): in this process, or in the PoP-local
    Redis (then also that client, for the cursor and for closing)."""
    if settings.edge_store == "redis":
        assert settings.edge_store_url is not None  # Settings checks it
        redis = connect(settings.edge_store_url, socket_timeout=0.5)
        return RedisEntryStore(redis, prefix=keys.edge_entry_prefix(region)), redis
    return MemoryEntryStore(max_bytes=settings.edge_cache_max_mb * 2**20, clock=clock), None


def _decision_log(
    settings: Settings, redis: RedisClient | None, clock: Callable[[], float]
) -> DecisionLog | None:
    """Where the edge logs the answers it serves: the decisions streams in ``REDIS_URL``'s
    Redis (None without one: nothing is logged)."""
    if redis is None:
        return None
    return configured_log(settings, redis, clock)


def _start_logs(
    edge: Edge,
    settings: Settings,
    redis: RedisClient | None,
    clock: Callable[[], float],
    stop: asyncio.Event,
) -> list[asyncio.Task[None]]:
    """The decision log's flushes, and with ranking at the edge the context log's, the
    shadow's and its log's (``edge.ranking.shadow``), until ``stop``; nothing without Redis."""
    edge.decisions = _decision_log(settings, redis, clock)
    if edge.decisions is None or redis is None:
        return []
    jobs = [edge.decisions.run]
    if edge.rank_at_edge:
        edge.evaluation = evaluation_of(settings, redis, clock)
        jobs += [job.run for job in edge.evaluation.logs()]
        if edge.evaluation.shadow is not None:
            jobs.append(edge.evaluation.shadow.run)
    return [asyncio.create_task(job(stop)) for job in jobs]


@router.get("/metrics", response_class=Response, responses=METRICS_RESPONSES)
async def metrics(request: Request) -> Response:
    exposition: EdgeMetrics = request.app.state.metrics
    return Response(await exposition.exposition(), media_type=CONTENT_TYPE)


def create_app(
    settings: Settings,
    *,
    region: str,
    clock: Callable[[], float] = time.time,
    origin_transport: Transports | None = None,
) -> EdgeFront:
    """The edge app; ``origin_transport`` replaces the network to the origins, one for all
    or one per origin URL (tests run real origin apps in-process through
    ``httpx.ASGITransport``)."""
    identity_keys = settings.identity_key_list
    if not identity_keys:
        raise ConfigError("PERSO_IDENTITY_KEYS is required by an edge (it verifies user tokens)")
    routes = _demo_routes(settings, region)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Ranking at the edge multiplies small matrices on the event loop: BLAS worker
        # threads only add overhead (measured: twice the CPU of a ranking on 2 cores).
        threadpool_limits(limits=1, user_api="blas")
        origin = _origin_client(settings, origin_transport)
        store, redis = _entry_store(settings, region, clock)
        edge = build_edge(
            settings, region=region, store=store, origin=origin, clock=clock, pop=redis
        )
        app.state.edge = edge
        stop = asyncio.Event()
        subscriber, sync_redis = _subscriber(settings, region, edge, redis, clock)
        for client in (redis, sync_redis):  # a cluster's layout, before concurrent use
            if client is not None:
                await ready(client)
        app.state.subscriber = subscriber
        app.state.metrics = EdgeMetrics(edge, subscriber)
        background = await _start_background(edge, settings, stop)
        syncing = asyncio.create_task(subscriber.run(stop)) if subscriber is not None else None
        flushing = _start_logs(edge, settings, sync_redis, clock, stop) + _register(
            settings, region, sync_redis, clock, stop
        )
        # What start-up built lives as long as the process: keep the cyclic collector from
        # scanning it again and again on the hit path.
        gc.collect()
        gc.freeze()
        origins = ",".join(settings.edge_origin_urls)
        log.info("edge %s ready, origins %s, store %s", region, origins, store)
        try:
            yield
        finally:
            stop.set()
            await _stop_background(background, flushing, syncing)
            await _close(edge, redis, sync_redis)

    app = FastAPI(title=f"perso edge ({region})", version="0.1.0", lifespan=lifespan)
    install_error_handlers(app)
    app.include_router(router)
    app.include_router(held_state_router)
    return EdgeFront(
        app,
        max_body_bytes=settings.edge_max_body_bytes,
        service_token=settings.origin_token,
        routes=routes,
        site=StaticSite.load(),
    )


async def _start_background(
    edge: Edge, settings: Settings, stop: asyncio.Event
) -> list[asyncio.Task[None]]:
    """The origins' health checks, started before the edge's first reads of its origin
    (``_before_serving``), then the popular list's refreshes, the item vectors' reads and the
    feedback spool's hand-overs, each until ``stop``."""
    loop = asyncio.get_running_loop()
    checking = loop.create_task(edge.origin.watch(stop, settings.origin_health_interval_s))
    await _before_serving(edge)
    return [
        checking,
        loop.create_task(edge.popular.run(stop)),
        *_item_vectors(edge, stop),
        *_feedback_spool(edge, stop),
    ]


async def _stop_background(
    background: list[asyncio.Task[None]],
    flushing: list[asyncio.Task[None]],
    syncing: asyncio.Task[None] | None,
) -> None:
    """With ``stop`` set: the background tasks cancelled, the logs' last flushes awaited,
    the sync subscriber cancelled."""
    for task in background:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    for job in flushing:
        await job  # stop is set: one last flush
    if syncing is not None:
        # cancelled: it finishes the batch in hand and saves its cursor first
        syncing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await syncing


async def _close(edge: Edge, redis: RedisClient | None, sync_redis: RedisClient | None) -> None:
    """The sync stream's Redis, the node, its origin client and its PoP store closed."""
    if sync_redis is not None:
        await sync_redis.aclose()
    await edge.aclose()
    await edge.origin.aclose()
    if redis is not None:
        await redis.aclose()


def _register(
    settings: Settings,
    region: str,
    redis: RedisClient | None,
    clock: Callable[[], float],
    stop: asyncio.Event,
) -> list[asyncio.Task[None]]:
    """This process's heartbeat in the registry of the origins' operations page
    (``coordination.registry``) until ``stop``, when it knows its URL and has the shared
    Redis; else nothing."""
    if redis is None or not settings.advertise_url:
        return []
    name = settings.edge_name or f"edge-{region}"
    registration = Registration(
        redis, name=name, kind="edge", region=region, url=settings.advertise_url, clock=clock
    )
    return [asyncio.create_task(registration.run(stop))]


def _demo_routes(settings: Settings, region: str) -> dict[str, Route]:
    """The demo token route when ``PERSO_DEMO_TOKENS`` asks for it (with its API key), else
    none: its path is then unknown (404)."""
    if not settings.demo_tokens:
        return {}
    if settings.demo_api_key is None:
        raise ConfigError(
            "PERSO_DEMO_TOKENS=true needs PERSO_DEMO_API_KEY: the secret of an API key of "
            "the origin's PERSO_API_KEYS (perso up --demo sets the stack's own)"
        )
    log.warning(
        "edge %s: demo mode, POST %s hands a user token for any user id to anyone who can "
        "reach this edge (PERSO_DEMO_TOKENS); never in production",
        region,
        DEMO_TOKEN_PATH,
    )
    return {DEMO_TOKEN_PATH: token_route(settings.demo_api_key)}
