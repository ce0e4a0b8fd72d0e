"""The origin's HTTP API: ``/v1/personalize``, ``/v1/feedback``, health and readiness."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import numpy as np
from fastapi import APIRouter, FastAPI, Request
from redis.asyncio import Redis
from redis.exceptions import RedisError
from starlette.responses import Response
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from invalidation.rules import Feedback
from origin import llm_precompute, user_state
from origin.admin import admin_router
from origin.api_keys import parse_api_keys
from origin.auth import ServiceCaller
from origin.bandit import BanditConfig
from origin.coordination_api import coordination_router
from origin.event_streams import ensure_groups
from origin.explain import explain_router
from origin.feedback import FeedbackLog
from origin.learning import learn
from origin.llm.tier import llm_tier
from origin.locks import origin_lock
from origin.metrics import metrics_router
from origin.model_deployment import ModelDeployments
from origin.personalize import (
    filters_of,
    personalize_response,
    popular_ranking,
    rank_request,
    user_vector_of,
)
from origin.posterior_store import PosteriorStore
from origin.preferences_api import preferences_router
from origin.purge import purge_router
from origin.state import Origin, load_index
from origin.tokens import tokens_router
from origin.vector_store import VectorStore
from perso.settings import ConfigError, Settings
from protocol import keys
from protocol.api import (
    FILL_SCOPE_HEADER,
    SEGMENT_SCOPE,
    FeedbackRequest,
    FeedbackResponse,
    PersonalizeRequest,
    PersonalizeResponse,
)
from protocol.exceptions import ApiError
from protocol.problems import install_error_handlers
from protocol.responses import elapsed_ms, json_response, readiness_response
from sync.publisher import SyncPublisher

log = logging.getLogger(__name__)


router = APIRouter()


def origin_of(request: Request) -> Origin:
    origin: Origin = request.app.state.origin
    return origin


@router.post(
    "/v1/personalize", response_class=Response, responses={200: {"model": PersonalizeResponse}}
)
async def personalize(
    body: PersonalizeRequest,
    request: Request,
    origin: ServiceCaller,
) -> Response:
    started = time.perf_counter()
    count = body.constraints.count
    if origin.inflight >= origin.settings.origin_max_inflight:
        # Shedding load: the precomputed popular answer costs next to nothing.
        ranking = popular_ranking(origin.index, filters_of(body), count)
        return json_response(
            personalize_response(origin, body, ranking, started=started, degraded=True)
        )
    origin.inflight += 1
    try:
        personal = request.headers.get(FILL_SCOPE_HEADER) != SEGMENT_SCOPE
        ranking, degraded = await rank_request(origin, body, personal)
    except Exception:
        # Seed 001: "500 Internal Error - Fallback to popular".
        log.exception("ranking failed; answering with popular items")
        ranking = popular_ranking(origin.index, filters_of(body), count)
        response = personalize_response(origin, body, ranking, started=started, degraded=True)
        return json_response(response, status=500)
    finally:
        origin.inflight -= 1
    return json_response(
        personalize_response(origin, body, ranking, started=started, degraded=degraded)
    )


@router.post("/v1/feedback", response_class=Response, responses={200: {"model": FeedbackResponse}})
async def feedback(body: FeedbackRequest, origin: ServiceCaller) -> Response:
    started = time.perf_counter()
    if origin.inflight >= origin.settings.origin_max_inflight:
        raise ApiError(429, "overloaded", "too many requests in flight; retry", retry_after_s=1)
    origin.inflight += 1
    try:
        await record_feedback(origin, body)
    except RedisError as exc:
        log.error("feedback not recorded: %r", exc)
        raise ApiError(
            503, "unavailable", "feedback store unavailable; retry", retry_after_s=1
        ) from exc
    finally:
        origin.inflight -= 1
    # a purchase: the buyer's entries at every edge
    await origin.announce(Feedback(body.user_id, item.action.value) for item in body.feedback)
    response = FeedbackResponse(
        status="accepted", processed=len(body.feedback), latency_ms=elapsed_ms(started)
    )
    return json_response(response)


async def record_feedback(origin: Origin, body: FeedbackRequest) -> None:
    """Append the events durably, record the interactions and update the bandit, in one
    pipeline after one read. Every part is idempotent, so a retry after a failure (503)
    completes what was missing and repeats nothing."""
    user_id = body.user_id
    events = origin.feedback.events_of(body)
    async with origin.redis.pipeline(transaction=False) as pipe:
        pipe.get(keys.user_embedding(user_id))
        user_state.queue_read(pipe, user_id)
        raw, fields, members = await pipe.execute()
    state = user_state.decode_state(fields, members)
    learned = learn(
        events,
        state,
        origin.index,
        user_vector=user_vector_of(origin, raw, user_id),
        session_idle_ms=origin.settings.session_idle_s * 1000,
    )
    async with origin.redis.pipeline(transaction=False) as pipe:
        await origin.feedback.queue_append(pipe, user_id, events)
        user_state.queue_interactions_write(pipe, user_id, learned.interactions)
        await origin.posteriors.queue_apply(pipe, learned.observations, origin.now_ms())
        await pipe.execute()


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", response_class=Response)
async def readyz(request: Request) -> Response:
    origin = origin_of(request)
    try:
        redis_ok = bool(await asyncio.wait_for(origin.redis.ping(), 1.0))
    except (RedisError, TimeoutError):
        redis_ok = False
    qdrant_ok = await origin.store.ping()
    checks = {"redis": redis_ok, "qdrant": qdrant_ok, "catalog_items": len(origin.index)}
    return readiness_response(redis_ok and qdrant_ok, checks)


@asynccontextmanager
async def background(
    job: Callable[[Origin, asyncio.Event], Coroutine[Any, Any, None]], origin: Origin
) -> AsyncIterator[None]:
    """``job`` running beside the app until it stops: told to stop, then awaited (a few
    seconds at most), then cancelled."""
    stop = asyncio.Event()
    task = asyncio.create_task(job(origin, stop))
    try:
        yield
    finally:
        stop.set()
        try:
            await asyncio.wait_for(task, timeout=5)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
        except Exception:
            log.exception("background job %s failed", getattr(job, "__module__", job))


def create_app(
    settings: Settings,
    *,
    clock: Callable[[], float] = time.time,
    rng: np.random.Generator | None = None,
) -> FastAPI:
    if not settings.redis_url:
        raise ConfigError("REDIS_URL is required by the origin (`perso up` starts one for you)")
    redis_url = settings.redis_url
    try:
        api_keys = parse_api_keys(settings.api_keys.get_secret_value()) if settings.api_keys else ()
    except ValueError as exc:
        raise ConfigError(f"PERSO_API_KEYS: {exc}") from exc

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Small matrix products on an event loop: BLAS worker threads only add overhead.
        threadpool_limits(limits=1, user_api="blas")
        redis = Redis.from_url(redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)
        store = VectorStore.open(settings)
        resources = AsyncExitStack()
        try:
            index = await load_index(store, settings.embedding_dim)
            await ensure_groups(redis, settings.event_partitions)
            feedback_log = FeedbackLog(
                redis,
                partitions=settings.event_partitions,
                dedup_ttl_s=settings.feedback_dedup_ttl_s,
                clock=clock,
            )
            bandit = BanditConfig(
                exploration_weight=settings.exploration_weight,
                min_exploration=settings.min_exploration,
                decay_half_life_s=settings.bandit_decay_half_life_s,
            )
            publisher = SyncPublisher(redis, settings.regions, clock)
            lock = await resources.enter_async_context(origin_lock(settings, redis, clock))
            app.state.origin = Origin(
                settings=settings,
                redis=redis,
                store=store,
                index=index,
                feedback=feedback_log,
                posteriors=PosteriorStore(redis, bandit),
                bandit=bandit,
                rng=rng if rng is not None else np.random.default_rng(),
                clock=clock,
                publisher=publisher,
                lock=lock,
                deployments=ModelDeployments.over(redis, lock, publisher),
                llm=await resources.enter_async_context(llm_tier(settings, redis)),
                api_keys=api_keys,
            )
            # The catalog is millions of long-lived objects: keep the cyclic collector from
            # scanning them on the request path (a full collection is a latency spike).
            gc.collect()
            gc.freeze()
            origin = app.state.origin
            if origin.llm.enabled and settings.llm_precompute_every_s > 0:
                await resources.enter_async_context(background(llm_precompute.run, origin))
            log.info("origin ready: %d items, dimension %d", len(index), index.dim)
            yield
        finally:
            await resources.aclose()
            await store.close()
            await redis.aclose()

    app = FastAPI(title="perso origin", version="0.1.0", lifespan=lifespan)
    install_error_handlers(app)
    app.include_router(router)
    app.include_router(admin_router)
    app.include_router(tokens_router)
    app.include_router(purge_router)
    app.include_router(coordination_router)
    app.include_router(metrics_router)
    app.include_router(explain_router)
    app.include_router(preferences_router)
    return app
