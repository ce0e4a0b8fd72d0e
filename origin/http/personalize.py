"""``POST /v1/personalize``: one request, from the body to a ranking: the user's model,
history and explicit preferences (``origin.ranking.preferences``: hidden categories leave
retrieval, the others shift scores), retrieval, the items' posteriors in the decision's
context cell, the pipeline of ``origin.ranking.pipeline``; and the fallbacks of the failure
table (user model or history unreadable: popular items; posteriors unreadable: the posterior
means of nothing learnt, no exploration).

Every answer is a decision (``protocol.decisions``): the origin logs the ones it serves
itself; an edge's fill (``DECISION_BY_HEADER``) is logged by the edge as it serves it, and
the origin hands the edge what the record needs (the context cell, the policy and each
item's propensity) in response headers.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import datetime
from typing import Annotated

import numpy as np
import numpy.typing as npt
from fastapi import APIRouter, Request
from starlette.responses import Response

from config.settings import Settings
from origin.catalog.item_index import Filters, ItemIndex
from origin.http.answers import FALLBACK_POLICY, RankedFrom, RankedRequest, answered
from origin.http.feature_reads import UserRead, read_posteriors, read_user, record_context
from origin.http.inputs import JsonBody, OriginOf
from origin.learned.posteriors import Stored, effective
from origin.llm.speculation import Speculation
from origin.policies.live import LivePolicy
from origin.ranking import preferences
from origin.ranking.emotion import NEUTRAL, EmotionalState, emotional_state
from origin.ranking.history import RankingHistory, RequestContext
from origin.ranking.pipeline import Ranked, Ranking, RankingOptions
from origin.ranking.profile import UserProfile, context_cell, local_time, profile_of
from origin.ranking.references import ranker_for
from origin.ranking.retrieval import Candidates, retrieve
from origin.runtime import Origin
from protocol.api import (
    FILL_SCOPE_HEADER,
    SEGMENT_SCOPE,
    Constraints,
    PersonalizeRequest,
    PersonalizeResponse,
)
from relevance.population import Population
from relevance.preferences import excluded
from relevance.user_model import UserModel
from web.responses import json_response

log = logging.getLogger(__name__)

personalize_router = APIRouter()

# Items of the learned rank offered to retrieval (a read is reused for
# origin.runtime.LEARNED_TTL_S).
LEARNED_TOP = 200


def filters_of(body: PersonalizeRequest) -> Filters:
    return constraint_filters(body.constraints)


def constraint_filters(constraints: Constraints) -> Filters:
    """What a request's ``constraints`` allow, as the index filters by."""
    price = constraints.price_range
    return Filters(
        categories=frozenset(constraints.categories) if constraints.categories else None,
        price_min=price.min if price else None,
        price_max=price.max if price else None,
        exclude=frozenset(constraints.exclude_items),
    )


def stored_rows(stored: Stored) -> npt.NDArray[np.float64]:
    """The candidates' stored posteriors as a pool carries them (``protocol.pools``): the
    cell's alpha, beta and last change, then all contexts'; zeros where none is stored."""
    columns = []
    for p in (stored.cell, stored.everywhere):
        for values in (p.alpha, p.beta, p.updated_ms):
            columns.append(np.where(p.observed, values, 0.0))
    return np.stack(columns, axis=1).astype(np.float64)


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


def beside(origin: Origin, body: PersonalizeRequest, unread: bool) -> tuple[bool, bool]:
    """Whether this decision's context goes to the context log, and whether the shadow
    policy runs on it: each a sample of the decisions the live policy made as it is (not by
    a request's own options, nor without exploration for want of posteriors), which a
    replay of the live policy reproduces."""
    own_options = body.options.exploration_rate is not None or (
        body.options.diversity_weight is not None
    )
    if unread or own_options:
        return False, False
    shadow = origin.shadow
    return origin.keeps_context(), shadow is not None and shadow.sampled()


async def rank_request(
    origin: Origin, index: ItemIndex, body: PersonalizeRequest, personal: bool
) -> RankedRequest:
    """The ranking for a request over ``index`` (the one the request read), and how it
    came about."""
    # One policy ranks, labels and logs the answer, whatever is promoted meanwhile.
    live = origin.live
    now_ms = origin.now_ms()
    context = body.context
    filters = filters_of(body)
    user, local = await _user_and_local_time(origin, body, personal, now_ms)
    cell = context_cell(context.device, local)
    if user.failed:
        return RankedRequest(
            popular_ranking(index, filters, body.constraints.count), True, cell, FALLBACK_POLICY
        )
    population = await origin.population()
    model = _ranking_model(live, user, population, index, personal)
    profile, emotion = _profile_and_emotion(
        origin.settings, index, body, user, model, local=local, now_ms=now_ms, personal=personal
    )
    candidates = await retrieved(origin, index, filters, user, profile)
    speculation = _speculation(
        origin, index, body, candidates, user, emotion=emotion, now_ms=now_ms, personal=personal
    )
    try:
        stored = await read_posteriors(origin, cell, index.item_ids[candidates.rows])
        unread = stored is None
        stored, options = _posteriors_and_options(
            origin, live, body, stored, candidates, personal=personal
        )
        log_context, shadowed = beside(origin, body, unread)
        ranked_from = _ranked_from(
            origin, index, candidates, stored, unread=unread, population=population, now_ms=now_ms
        )
        ranking = ranker_for(live.policy.config.kind)(
            index,
            candidates,
            profile=profile,
            emotion=emotion,
            user=model,
            alpha=ranked_from.alpha,
            beta=ranked_from.beta,
            value=ranked_from.value,
            rng=origin.rng,
            options=options,
            preferences=preferences.by_code(user.preferences, index.category_code),
            keep_inputs=log_context or shadowed,
        )
    except BaseException:
        if speculation is not None:
            speculation.cancel()
        raise
    if speculation is not None:
        ranking = await _headlined(ranking, speculation)
    return RankedRequest(
        ranking,
        unread,
        cell,
        live.policy.name,
        ranked_from,
        live.policy.version,
        live.model_version,
        log_context=log_context,
        shadowed=shadowed,
    )


def _profile_and_emotion(
    settings: Settings,
    index: ItemIndex,
    body: PersonalizeRequest,
    user: UserRead,
    model: UserModel | None,
    *,
    local: datetime,
    now_ms: int,
    personal: bool,
) -> tuple[UserProfile, EmotionalState]:
    """The user as the request ranks for them: their profile (context, session, the
    model's mean) and their emotional state in their session (neutral for a shared
    answer)."""
    context = body.context
    session_idle_ms = settings.session_idle_s * 1000
    profile = profile_of(
        user.state,
        index,
        device=context.device,
        local=local,
        now_ms=now_ms,
        session_idle_ms=session_idle_ms,
        user_vector=model.mean if model is not None else None,
        personal=personal,
    )
    if not personal:
        return profile, NEUTRAL
    emotion = emotional_state(
        user.state.session(now_ms, session_idle_ms), context.page_type, now_ms
    )
    return profile, emotion


def _speculation(
    origin: Origin,
    index: ItemIndex,
    body: PersonalizeRequest,
    candidates: Candidates,
    user: UserRead,
    *,
    emotion: EmotionalState,
    now_ms: int,
    personal: bool,
) -> Speculation | None:
    """The model's headline for the likeliest top item, asked for while the request ranks,
    when a personal answer wants an explanation and the origin speculates
    (``PERSO_LLM_SPECULATE``); None otherwise."""
    settings = origin.settings
    if not (personal and body.options.include_explanation and settings.llm_speculate):
        return None
    return Speculation.start(
        origin.llm,
        index,
        candidates,
        now_ms=now_ms,
        state=user.state,
        preferences=user.preferences,
        emotion=emotion,
        page_type=body.context.page_type,
        budget_ms=settings.llm_timeout_ms,
    )


def _posteriors_and_options(
    origin: Origin,
    live: LivePolicy,
    body: PersonalizeRequest,
    stored: Stored | None,
    candidates: Candidates,
    *,
    personal: bool,
) -> tuple[Stored, RankingOptions]:
    """The candidates' posteriors and the options they are ranked with; posteriors that
    could not be read (``stored`` None) are the priors, ranked without exploration."""
    options = RankingOptions(
        count=body.constraints.count,
        exploration_rate=body.options.exploration_rate,
        diversity_weight=body.options.diversity_weight,
        personal=personal,
        rules=live.rules,
    )
    if stored is None:
        # The failure table: posterior store unavailable -> rank without exploration.
        stored = origin.posteriors.prior(len(candidates))
        options = replace(options, exploration_rate=0.0)
    return stored, options


def _ranked_from(
    origin: Origin,
    index: ItemIndex,
    candidates: Candidates,
    stored: Stored,
    *,
    unread: bool,
    population: Population | None,
    now_ms: int,
) -> RankedFrom:
    """What the candidates are ranked from: their effective posteriors and values now."""
    config = origin.posteriors.config
    alpha, beta = effective(
        stored.cell, stored.everywhere, index.category[candidates.rows], now_ms, config
    )
    return RankedFrom(
        candidates,
        alpha,
        beta,
        stored.values.relative(now_ms, config),
        None if unread else stored_rows(stored),
        population,
    )


async def _user_and_local_time(
    origin: Origin, body: PersonalizeRequest, personal: bool, now_ms: int
) -> tuple[UserRead, datetime]:
    """The user's model and ranking history as the request reads them (nothing of theirs
    for a shared answer) with the request's context recorded, and the request's local
    time."""
    context = body.context
    user = UserRead(RankingHistory(), None, failed=False)
    latest = RequestContext(
        context.device, _utc_offset_min(context.timestamp), context.page_type, now_ms
    )
    if personal:
        user = await read_user(origin, body.user_id, latest)
    else:
        # A shared answer uses nothing of the user's, but their context is still theirs to
        # record.
        await record_context(origin, body.user_id, latest)
    offset = latest.utc_offset_min
    if offset is None:
        offset = user.state.context.utc_offset_min
    return user, local_time(now_ms, offset or 0, context.timestamp)


def _ranking_model(
    live: LivePolicy,
    user: UserRead,
    population: Population | None,
    index: ItemIndex,
    personal: bool,
) -> UserModel | None:
    """The user's model as it ranks (under the users' population prior and the policy's
    prior strength): what retrieval looks near and the ranking draws from. A user of whom
    nothing is known is drawn from the population prior itself, as at the edge; a shared
    answer (a segment's, a pool's) is ranked by the items' own terms."""
    model = live.user_model(user.model, population)
    if model is None and personal:
        model = live.newcomer(population, index.vectors.shape[1])
    return model


async def _headlined(ranking: Ranking, speculation: Speculation) -> Ranking:
    """The ranking with its top item's reason the model's headline, when the speculative
    call wrote one for that item in time."""
    if not ranking.items:
        return ranking
    top = ranking.items[0]
    headline = await speculation.headline_for(top.row)
    if headline is None:
        return ranking
    top = replace(top, reason=headline, llm_generated=True)
    return replace(ranking, items=[top, *ranking.items[1:]])


async def retrieved(
    origin: Origin, index: ItemIndex, filters: Filters, user: UserRead, profile: UserProfile
) -> Candidates:
    """The candidates of a request: those its filters and the user's hidden categories
    allow, near the user's model and session, and what everybody engages with."""
    mask = index.mask(filters)
    hidden = excluded(user.preferences)
    if hidden:
        # Like a request's category filter, but the other way round.
        codes = [c for c in (index.category_code(name) for name in hidden) if c is not None]
        mask &= ~np.isin(index.category, codes)
    return retrieve(
        index,
        mask,
        origin.settings.ranking_candidates,
        origin.rng,
        user_vector=profile.user_vector,
        session_vector=profile.session_vector,
        learned=await origin.learned_top(index, LEARNED_TOP),
    )


def _utc_offset_min(moment: datetime | None) -> int | None:
    if moment is None or moment.utcoffset() is None:
        return None
    offset = moment.utcoffset()
    return int(offset.total_seconds() // 60) if offset is not None else None


@personalize_router.post(
    "/v1/personalize",
    response_class=Response,
    responses={
        200: {"model": PersonalizeResponse},
        500: {
            "model": PersonalizeResponse,
            "description": "The ranking failed: popular items instead, `degraded: true`",
        },
    },
)
async def personalize(
    body: Annotated[PersonalizeRequest, JsonBody.of(PersonalizeRequest)],
    request: Request,
    origin: OriginOf,
) -> Response:
    started = time.perf_counter()
    count = body.constraints.count
    personal = request.headers.get(FILL_SCOPE_HEADER) != SEGMENT_SCOPE
    status = 200
    # Read once: rows are positions in one index, and a catalog write may swap in another
    # while this request awaits.
    index = origin.index
    if origin.inflight >= origin.settings.origin_max_inflight:
        # Shedding load: the precomputed popular answer costs next to nothing.
        ranked = RankedRequest(
            popular_ranking(index, filters_of(body), count), True, "", FALLBACK_POLICY
        )
    else:
        origin.inflight += 1
        try:
            ranked = await rank_request(origin, index, body, personal)
        except Exception:
            # The HTTP API contract: "500 Internal Error - Fallback to popular".
            log.exception("ranking failed; answering with popular items")
            ranked = RankedRequest(
                popular_ranking(index, filters_of(body), count), True, "", FALLBACK_POLICY
            )
            status = 500
        finally:
            origin.inflight -= 1
    response, headers = answered(
        origin, index, body, ranked, request, started=started, personal=personal
    )
    return json_response(response, status=status, headers=headers)
