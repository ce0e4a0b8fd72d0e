"""The origin's HTTP API: ``/v1/personalize``, ``/v1/feedback``, health and readiness."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Annotated, Any

import numpy as np
import numpy.typing as npt
from fastapi import APIRouter, Depends, FastAPI, Request
from redis.asyncio import Redis
from redis.exceptions import RedisError
from starlette.responses import Response
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from origin import user_state
from origin.admin import admin_router
from origin.auth import check_service
from origin.bandit import BanditConfig, Posteriors
from origin.context_features import FEATURES, context_segment, local_time, profile_of
from origin.embedding_worker import ensure_groups
from origin.emotion import NEUTRAL, emotional_state
from origin.exceptions import CatalogError
from origin.feedback import FeedbackLog
from origin.item_index import Filters, ItemIndex
from origin.learning import learn
from origin.posterior_store import PosteriorStore
from origin.ranking import Ranked, Ranking, RankingOptions, rank
from origin.responses import ranked_items
from origin.retrieval import retrieve
from origin.user_state import RequestContext, UserState
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
    posteriors: PosteriorStore
    bandit: BanditConfig
    rng: np.random.Generator
    clock: Callable[[], float]
    inflight: int = 0

    async def replace_index(self, index: ItemIndex) -> None:
        """Swap in a new catalog index; requests already running keep the old one."""
        self.index = index

    def now_ms(self) -> int:
        return int(self.clock() * 1000)


async def load_index(store: VectorStore, dim: int) -> ItemIndex:
    batches = [batch async for batch in store.scroll_items()]
    index = await asyncio.to_thread(ItemIndex.from_batches, batches)
    if index.dim != dim:
        raise CatalogError(
            f"catalog vectors have dimension {index.dim}, PERSO_EMBEDDING_DIM is {dim}"
        )
    return index


router = APIRouter()


def origin_of(request: Request) -> Origin:
    origin: Origin = request.app.state.origin
    return origin


async def authorized(request: Request) -> Origin:
    """The origin, once the caller proved to be an edge (a dependency: it runs before the
    body is read, so an unauthorised caller learns nothing about it). ``async`` so that
    FastAPI calls it on the event loop, not in its thread pool."""
    origin = origin_of(request)
    check_service(request, origin.settings.origin_token)
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


@dataclass(frozen=True)
class UserRead:
    state: UserState
    vector: Vector | None
    failed: bool


async def read_user(origin: Origin, user_id: str, context: RequestContext | None) -> UserRead:
    """The user's embedding and state in one round trip, recording ``context`` as their
    latest; a failed or slow read is reported, never raised (the answer degrades)."""

    async def run() -> list[Any]:
        async with origin.redis.pipeline(transaction=False) as pipe:
            pipe.get(keys.user_embedding(user_id))
            user_state.queue_read(pipe, user_id)
            if context is not None:
                user_state.queue_context_write(pipe, user_id, context)
            replies: list[Any] = await pipe.execute()
            return replies

    try:
        replies = await asyncio.wait_for(run(), FEATURE_READ_TIMEOUT_S)
    except (RedisError, TimeoutError) as exc:
        log.warning("user state read failed, serving popular items: %r", exc)
        return UserRead(UserState(), None, failed=True)
    raw, fields, members = replies[0], replies[1], replies[2]
    return UserRead(user_state.decode_state(fields, members), _vector(origin, raw, user_id), False)


def _vector(origin: Origin, raw: bytes | None, user_id: str) -> Vector | None:
    if raw is None:
        return None
    try:
        return unpack_vector(raw, origin.index.dim)
    except ValueError:
        # Written before the configured dimension changed: the worker replaces it on the
        # user's next interaction; until then the user is served as a cold one.
        log.warning("embedding of %s has another dimension; serving it as cold", user_id)
        return None


async def read_posteriors(
    origin: Origin,
    segment: str,
    item_ids: npt.NDArray[np.object_],
) -> tuple[Posteriors, npt.NDArray[np.float32]] | None:
    try:
        return await asyncio.wait_for(
            origin.posteriors.read(segment, item_ids), FEATURE_READ_TIMEOUT_S
        )
    except (RedisError, TimeoutError) as exc:
        log.warning("posterior read failed, ranking without exploration: %r", exc)
        return None


def popular_ranking(index: ItemIndex, filters: Filters, count: int) -> Ranking:
    """The answer of last resort: trending items, no personal data, no bandit."""
    rows = index.popular(count, index.mask(filters))
    return Ranking(
        [
            Ranked(
                row=int(row),
                score=round(float(index.trending[row]), 6),
                source="trending",
                exploration=False,
                signals=("trending",),
                reason=f"Popular in {index.items[int(row)].category_name} right now",
                rules=(),
                uncertainty=1.0,
            )
            for row in rows
        ]
    )


async def rank_request(
    origin: Origin, body: PersonalizeRequest, personal: bool
) -> tuple[Ranking, bool]:
    """The ranking for a request and whether it is degraded."""
    settings, index = origin.settings, origin.index
    now_ms = origin.now_ms()
    context = body.context
    filters = filters_of(body)
    user = UserRead(UserState(), None, failed=False)
    if personal:
        user = await read_user(
            origin,
            body.user_id,
            RequestContext(
                context.device, _utc_offset_min(context.timestamp), context.page_type, now_ms
            ),
        )
        if user.failed:
            return popular_ranking(index, filters, body.constraints.count), True
    offset = _utc_offset_min(context.timestamp)
    if offset is None:
        offset = user.state.context.utc_offset_min
    local = local_time(now_ms, offset or 0, context.timestamp)
    profile = profile_of(
        user.state,
        index,
        device=context.device,
        local=local,
        now_ms=now_ms,
        session_idle_ms=settings.session_idle_s * 1000,
        user_vector=user.vector,
        personal=personal,
    )
    emotion = (
        emotional_state(
            user.state.session(now_ms, settings.session_idle_s * 1000), context.page_type, now_ms
        )
        if personal
        else NEUTRAL
    )
    candidates = retrieve(
        index,
        index.mask(filters),
        settings.ranking_candidates,
        user_vector=profile.user_vector,
        session_vector=profile.session_vector,
    )
    segment = context_segment(context.device, local)
    stored = await read_posteriors(origin, segment, index.item_ids[candidates.rows])
    options = RankingOptions(
        count=body.constraints.count,
        exploration_rate=body.options.exploration_rate,
        diversity_weight=body.options.diversity_weight,
        personal=personal,
    )
    degraded = stored is None
    if stored is None:
        # Seed 000: posterior store unavailable -> fall back to the base ranking.
        stored = (Posteriors.prior(len(candidates), origin.bandit), np.zeros(FEATURES, np.float32))
        options = replace(options, exploration_rate=0.0)
    posteriors, weights = stored
    ranking = rank(
        index,
        candidates,
        profile=profile,
        emotion=emotion,
        posteriors=posteriors,
        context_weights=weights,
        rng=origin.rng,
        config=origin.bandit,
        options=options,
        now_ms=now_ms,
    )
    return ranking, degraded


def _utc_offset_min(moment: datetime | None) -> int | None:
    if moment is None or moment.utcoffset() is None:
        return None
    offset = moment.utcoffset()
    return int(offset.total_seconds() // 60) if offset is not None else None


def personalize_response(
    origin: Origin,
    body: PersonalizeRequest,
    ranking: Ranking,
    *,
    started: float,
    degraded: bool,
) -> PersonalizeResponse:
    return PersonalizeResponse(
        request_id=str(uuid.uuid4()),
        user_id=body.user_id,
        items=ranked_items(origin.index, ranking, explain=body.options.include_explanation),
        metadata=ResponseMetadata(
            latency_ms=elapsed_ms(started),
            tier="origin",
            cache_hit=False,
            exploration_applied=ranking.exploration_applied,
            model_version=origin.settings.model_version,
            degraded=degraded,
        ),
    )


@router.post(
    "/v1/personalize", response_class=Response, responses={200: {"model": PersonalizeResponse}}
)
async def personalize(
    body: PersonalizeRequest,
    request: Request,
    origin: Annotated[Origin, Depends(authorized)],
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
async def feedback(
    body: FeedbackRequest, origin: Annotated[Origin, Depends(authorized)]
) -> Response:
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
        user_vector=_vector(origin, raw, user_id),
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


def create_app(
    settings: Settings,
    *,
    clock: Callable[[], float] = time.time,
    rng: np.random.Generator | None = None,
) -> FastAPI:
    if not settings.redis_url:
        raise ConfigError("REDIS_URL is required by the origin (`perso up` starts one for you)")
    redis_url = settings.redis_url

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Small matrix products on an event loop: BLAS worker threads only add overhead.
        threadpool_limits(limits=1, user_api="blas")
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
            bandit = BanditConfig(
                exploration_weight=settings.exploration_weight,
                min_exploration=settings.min_exploration,
                decay_half_life_s=settings.bandit_decay_half_life_s,
            )
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
            )
            # The catalog is millions of long-lived objects: keep the cyclic collector from
            # scanning them on the request path (a full collection is a latency spike).
            gc.collect()
            gc.freeze()
            log.info("origin ready: %d items, dimension %d", len(index), index.dim)
            yield
        finally:
            await store.close()
            await redis.aclose()

    app = FastAPI(title="perso origin", version="0.1.0", lifespan=lifespan)
    install_error_handlers(app)
    app.include_router(router)
    app.include_router(admin_router)
    return app
