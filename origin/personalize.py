"""One personalize request, from the body to a ranking: the user's state, embedding and
explicit preferences (``origin.preferences``: hidden categories leave retrieval, the others
shift scores), retrieval, the posteriors, the pipeline of ``origin.ranking``; and the
fallbacks of seed 000's failure table (user state unreadable: popular items; posteriors
unreadable: the base ranking without exploration).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from redis.exceptions import RedisError

from origin import preferences, user_state
from origin.bandit import Posteriors
from origin.context_features import (
    FEATURES,
    UserProfile,
    context_segment,
    local_time,
    profile_of,
)
from origin.emotion import NEUTRAL, EmotionalState, emotional_state
from origin.item_index import Filters, ItemIndex
from origin.ranking import Ranked, Ranking, RankingOptions, rank
from origin.responses import ranked_items
from origin.retrieval import Candidates, retrieve
from origin.speculation import Speculation
from origin.state import Origin
from origin.user_state import RequestContext, UserState
from protocol import keys
from protocol.api import PersonalizeRequest, PersonalizeResponse, ResponseMetadata
from protocol.responses import elapsed_ms
from protocol.vectors import Vector, unpack_vector

log = logging.getLogger(__name__)

# Seed 000: a feature/posterior store slower than 100 ms is treated as unavailable.
FEATURE_READ_TIMEOUT_S = 0.1


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
    # Category name -> signed strength (``origin.preferences``).
    preferences: preferences.Strengths = field(default_factory=dict)


async def read_user(origin: Origin, user_id: str, context: RequestContext | None) -> UserRead:
    """The user's embedding, state and preferences in one round trip, recording ``context``
    as their latest; a failed or slow read is reported, never raised (the answer degrades)."""

    async def run() -> list[Any]:
        async with origin.redis.pipeline(transaction=False) as pipe:
            pipe.get(keys.user_embedding(user_id))
            user_state.queue_read(pipe, user_id)
            preferences.queue_read(pipe, user_id)
            if context is not None:
                user_state.queue_context_write(pipe, user_id, context)
            replies: list[Any] = await pipe.execute()
            return replies

    try:
        replies = await asyncio.wait_for(run(), FEATURE_READ_TIMEOUT_S)
    except (RedisError, TimeoutError) as exc:
        log.warning("user state read failed, serving popular items: %r", exc)
        return UserRead(UserState(), None, failed=True)
    raw, fields, members, stated = replies[0], replies[1], replies[2], replies[3]
    return UserRead(
        user_state.decode_state(fields, members),
        user_vector_of(origin, raw, user_id),
        False,
        preferences.decode(stated),
    )


async def record_context(origin: Origin, user_id: str, context: RequestContext) -> None:
    """Record the user's latest request context; a failure costs only that record."""

    async def run() -> None:
        async with origin.redis.pipeline(transaction=False) as pipe:
            user_state.queue_context_write(pipe, user_id, context)
            await pipe.execute()

    try:
        await asyncio.wait_for(run(), FEATURE_READ_TIMEOUT_S)
    except (RedisError, TimeoutError) as exc:
        log.warning("could not record the context of %s: %r", user_id, exc)


def user_vector_of(origin: Origin, raw: bytes | None, user_id: str) -> Vector | None:
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
    latest = RequestContext(
        context.device, _utc_offset_min(context.timestamp), context.page_type, now_ms
    )
    if personal:
        user = await read_user(origin, body.user_id, latest)
        if user.failed:
            return popular_ranking(index, filters, body.constraints.count), True
    else:
        # A shared answer uses nothing of the user's, but their context is still theirs to
        # record: their feedback is learned in the segment of the device they use.
        await record_context(origin, body.user_id, latest)
    offset = latest.utc_offset_min
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
    mask = index.mask(filters)
    hidden = preferences.excluded(user.preferences)
    if hidden:
        # Like a request's category filter, but the other way round.
        codes = [c for c in (index.category_code(name) for name in hidden) if c is not None]
        mask &= ~np.isin(index.category, codes)
    candidates = retrieve(
        index,
        mask,
        settings.ranking_candidates,
        user_vector=profile.user_vector,
        session_vector=profile.session_vector,
    )
    segment = context_segment(context.device, local)
    speculation = (
        Speculation.start(
            origin,
            candidates,
            state=user.state,
            preferences=user.preferences,
            emotion=emotion,
            page_type=context.page_type,
            budget_ms=settings.llm_timeout_ms,
        )
        if personal and body.options.include_explanation
        else None
    )
    try:
        ranking, degraded = await _rank(
            origin,
            body,
            candidates,
            profile=profile,
            emotion=emotion,
            user=user,
            segment=segment,
            personal=personal,
            now_ms=now_ms,
        )
    except BaseException:
        if speculation is not None:
            speculation.cancel()
        raise
    if speculation is not None and ranking.items:
        top = ranking.items[0]
        headline = await speculation.headline_for(top.row)
        if headline is not None:
            top = replace(top, reason=headline, llm_generated=True)
            ranking = replace(ranking, items=[top, *ranking.items[1:]])
    return ranking, degraded


async def _rank(
    origin: Origin,
    body: PersonalizeRequest,
    candidates: Candidates,
    *,
    profile: UserProfile,
    emotion: EmotionalState,
    user: UserRead,
    segment: str,
    personal: bool,
    now_ms: int,
) -> tuple[Ranking, bool]:
    """The posteriors of the candidates, then the ranking pipeline."""
    index = origin.index
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
        preferences=preferences.by_code(user.preferences, index.category_code),
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
