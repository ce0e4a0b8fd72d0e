"""The origin's HTTP API: ``/v1/personalize``, ``/v1/feedback``, health and readiness."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import cast

from fastapi import APIRouter, FastAPI, Request
from redis.asyncio import Redis
from redis.exceptions import RedisError
from starlette.responses import Response

from origin.embedding_worker import ensure_groups
from origin.exceptions import CatalogError
from origin.feedback import FeedbackLog
from origin.item_index import Filters, ItemIndex
from origin.ranking import rank_cold, rank_known
from origin.responses import ranked_items
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
    ResponseMetadata,
)
from protocol.exceptions import ApiError
from protocol.problems import install_error_handlers
from protocol.responses import elapsed_ms, json_response, readiness_response
from protocol.vectors import Vector, unpack_vector

log = logging.getLogger(__name__)

# Seed 000: a feature/posterior store slower than 100 ms is treated as unavailable.
FEATURE_READ_TIMEOUT_S = 0.1


@dataclass
class Origin:
    settings: Settings
    redis: Redis
    store: VectorStore
    index: ItemIndex
    feedback: FeedbackLog

    async def replace_index(self, index: ItemIndex) -> None:
        """Swap in a new catalog index; requests already running keep the old one."""
        self.index = index


async def load_index(store: VectorStore, dim: int) -> ItemIndex:
    batches = [batch async for batch in store.scroll_items()]
    index = ItemIndex.from_batches(batches)
    if index.dim != dim:
        raise CatalogError(
            f"catalog vectors have dimension {index.dim}, PERSO_EMBEDDING_DIM is {dim}"
        )
    return index


router = APIRouter()


def origin_of(request: Request) -> Origin:
    origin: Origin = request.app.state.origin
    return origin


def filters_of(body: PersonalizeRequest) -> Filters:
    constraints = body.constraints
    price = constraints.price_range
    return Filters(
        categories=frozenset(constraints.categories) if constraints.categories else None,
        price_min=price.min if price else None,
        price_max=price.max if price else None,
        exclude=frozenset(constraints.exclude_items),
    )


async def read_user_vector(origin: Origin, user_id: str) -> tuple[Vector | None, bool]:
    """The user's embedding if they have one; the flag says the read failed (degraded)."""
    try:
        raw = cast(
            bytes | None,
            await asyncio.wait_for(
                origin.redis.get(keys.user_embedding(user_id)), FEATURE_READ_TIMEOUT_S
            ),
        )
    except (RedisError, TimeoutError) as exc:
        log.warning("embedding read failed, serving trending: %r", exc)
        return None, True
    if raw is None:
        return None, False
    try:
        return unpack_vector(raw, origin.index.dim), False
    except ValueError:
        # Written before the configured dimension changed: the worker replaces it on the
        # user's next interaction; until then the user is served as a cold one.
        log.warning("embedding of %s has another dimension; serving trending", user_id)
        return None, False


@router.post(
    "/v1/personalize", response_class=Response, responses={200: {"model": PersonalizeResponse}}
)
async def personalize(body: PersonalizeRequest, request: Request) -> Response:
    started = time.perf_counter()
    origin = origin_of(request)
    filters = filters_of(body)
    count = body.constraints.count
    user_vector, degraded = None, False
    if request.headers.get(FILL_SCOPE_HEADER) != SEGMENT_SCOPE:
        user_vector, degraded = await read_user_vector(origin, body.user_id)
    if user_vector is not None:
        ranked = rank_known(origin.index, user_vector, filters, count)
    else:
        ranked = rank_cold(origin.index, filters, count)
    response = PersonalizeResponse(
        request_id=str(uuid.uuid4()),
        user_id=body.user_id,
        items=ranked_items(origin.index, ranked, explain=body.options.include_explanation),
        metadata=ResponseMetadata(
            latency_ms=elapsed_ms(started),
            tier="origin",
            cache_hit=False,
            exploration_applied=False,
            model_version=origin.settings.model_version,
            degraded=degraded,
        ),
    )
    return json_response(response)


@router.post("/v1/feedback", response_class=Response, responses={200: {"model": FeedbackResponse}})
async def feedback(body: FeedbackRequest, request: Request) -> Response:
    started = time.perf_counter()
    try:
        await origin_of(request).feedback.record(body)
    except RedisError as exc:
        log.error("feedback not recorded: %r", exc)
        raise ApiError(
            503, "unavailable", "feedback store unavailable; retry", retry_after_s=1
        ) from exc
    response = FeedbackResponse(
        status="accepted", processed=len(body.feedback), latency_ms=elapsed_ms(started)
    )
    return json_response(response)


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


def create_app(settings: Settings, *, clock: Callable[[], float] = time.time) -> FastAPI:
    if not settings.redis_url:
        raise ConfigError("REDIS_URL is required by the origin (`perso up` starts one for you)")
    redis_url = settings.redis_url

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        redis = Redis.from_url(redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)
        store = VectorStore.open(settings)
        try:
            index = await load_index(store, settings.embedding_dim)
            await ensure_groups(redis, settings.event_partitions)
            feedback_log = FeedbackLog(
                redis,
                partitions=settings.event_partitions,
                dedup_ttl_s=settings.feedback_dedup_ttl_s,
                clock=clock,
            )
            app.state.origin = Origin(settings, redis, store, index, feedback_log)
            log.info("origin ready: %d items, dimension %d", len(index), index.dim)
            yield
        finally:
            await store.close()
            await redis.aclose()

    app = FastAPI(title="perso origin", version="0.1.0", lifespan=lifespan)
    install_error_handlers(app)
    app.include_router(router)
    return app
