"""``POST /v1/internal/pools``: an edge's pool fill (shared candidate pools); and
``POST /v1/internal/pools/items``: some items as rows of a pool the edge holds (a known
user's own candidates, retrieved at the edge: ``edge.ranking.own_candidates``).

An edge that ranks a segment's candidates for its own users (``relevance.slate``, the code
the origin ranks with) asks, for a shared cache key, for the answer ``/v1/personalize``
gives that key's shared fill and for the pool it was ranked from
(``origin.ranking.pools``): one retrieval, one posterior read. Authorised like any fill (the
service token, ``origin.http.auth``); the body is the edge's shared fill request.

Shared by construction: the ranking is ``rank_request``'s segment-wide one, which reads
nothing of the user's (state, model, history, preferences); a request that does not ask
for the segment's answer (``FILL_SCOPE_HEADER: segment``) is a 400 naming the header. When
the posteriors could not be read, the answer says ``degraded`` (an edge does not store it)
and the pool holds the prior posteriors. The body is ``protocol.pools.encode_pool_fill``'s,
with the headers a shared fill of ``/v1/personalize`` gets.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Request
from starlette.responses import Response

from origin.http.answers import answered
from origin.http.feature_reads import read_posteriors
from origin.http.inputs import JsonBody, OriginOf
from origin.http.personalize import constraint_filters, rank_request, stored_rows
from origin.learned.posteriors import effective
from origin.ranking.pools import build_pool
from origin.ranking.retrieval import Candidates, Source
from protocol.api import FILL_SCOPE_HEADER, SEGMENT_SCOPE, PersonalizeRequest
from protocol.exceptions import ApiError
from protocol.pools import (
    POOL_ITEMS_PATH,
    POOL_MEDIA_TYPE,
    POOLS_PATH,
    PoolItemsRequest,
    encode_pool,
    encode_pool_fill,
)
from relevance.population import population_bytes
from web.openapi import declared

pools_router = APIRouter()

POOL_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "`{answer: bytes, pool: bytes}` in msgpack (`protocol.pools`): the "
        "shared fill's JSON answer and the candidate pool it was ranked from",
        "content": {POOL_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
    },
    **declared(503),
}
SCOPE_PARAMETER = {
    "name": FILL_SCOPE_HEADER,
    "in": "header",
    "required": True,
    "description": "A pool is the segment's: only a shared fill may ask for one.",
    "schema": {"type": "string", "enum": [SEGMENT_SCOPE]},
}


@pools_router.post(
    POOLS_PATH,
    response_class=Response,
    responses=POOL_RESPONSES,
    openapi_extra={"parameters": [SCOPE_PARAMETER]},
)
async def pools(
    body: Annotated[PersonalizeRequest, JsonBody.of(PersonalizeRequest)],
    request: Request,
    origin: OriginOf,
) -> Response:
    started = time.perf_counter()
    if request.headers.get(FILL_SCOPE_HEADER) != SEGMENT_SCOPE:
        raise ApiError(
            400,
            "invalid_request",
            f"a pool is shared: ask with {FILL_SCOPE_HEADER}: {SEGMENT_SCOPE}",
            field=FILL_SCOPE_HEADER,
        )
    # Read once: rows are positions in one index (see origin.http.personalize).
    index = origin.index
    if origin.inflight >= origin.settings.origin_max_inflight:
        # Unlike a personalize fill, a pool has no cheap stand-in: the edge keeps what it has.
        raise ApiError(503, "unavailable", "origin overloaded; retry", retry_after_s=1)
    origin.inflight += 1
    try:
        ranked = await rank_request(origin, index, body, personal=False)
    finally:
        origin.inflight -= 1
    built_from = ranked.ranked_from
    if built_from is None:  # a shared ranking always ranks its candidates; never the case
        raise ApiError(503, "unavailable", "no candidates were ranked; retry", retry_after_s=1)
    pool = build_pool(
        index,
        built_from.candidates,
        alpha=built_from.alpha,
        beta=built_from.beta,
        value=built_from.value,
        stored=built_from.stored,
        population=(
            None if built_from.population is None else population_bytes(built_from.population)
        ),
        answer_rows=[r.row for r in ranked.ranking.items],
        size=origin.settings.pool_size,
        value_weight=origin.ranking.value_weight,
        context=ranked.cell,
        model_version=ranked.model(origin),
        built_ms=origin.now_ms(),
    )
    response, headers = answered(
        origin, index, body, ranked, request, started=started, personal=False
    )
    answer = response.model_dump_json().encode()
    return Response(encode_pool_fill(answer, pool), media_type=POOL_MEDIA_TYPE, headers=headers)


POOL_ITEMS_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "a pool in msgpack (`protocol.pools.encode_pool`): the asked items "
        "the catalog holds and the constraints allow, as rows of a pool in `cell`",
        "content": {POOL_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
    },
    **declared(503),
}


@pools_router.post(POOL_ITEMS_PATH, response_class=Response, responses=POOL_ITEMS_RESPONSES)
async def pool_items(
    body: Annotated[PoolItemsRequest, JsonBody.of(PoolItemsRequest)], origin: OriginOf
) -> Response:
    """Some items as rows of a pool an edge holds (``protocol.pools.PoolItemsRequest``):
    their effective posteriors in the pool's cell, read and computed as a fill's are, and
    what their engagements are worth. Nothing of any user's is read; the ids are the edge's
    choice."""
    index = origin.index  # read once: rows are positions in one index
    mask = index.mask(constraint_filters(body.constraints))
    found = (index.row_of.get(i) for i in dict.fromkeys(body.item_ids))
    rows = np.array([r for r in found if r is not None and mask[r]], np.intp)
    now_ms = origin.now_ms()
    stored = await read_posteriors(origin, body.cell, index.item_ids[rows])
    if stored is None:
        # Unlike a fill, nothing ranks here: the edge keeps what it has and asks again.
        raise ApiError(
            503, "unavailable", "the items' posteriors could not be read", retry_after_s=1
        )
    config = origin.posteriors.config
    alpha, beta = effective(stored.cell, stored.everywhere, index.category[rows], now_ms, config)
    population = await origin.population()
    pool = build_pool(
        index,
        Candidates(rows, np.full(rows.size, Source.COLLABORATIVE, np.int8)),
        alpha=alpha,
        beta=beta,
        value=stored.values.relative(now_ms, config),
        stored=stored_rows(stored),
        population=None if population is None else population_bytes(population),
        answer_rows=(),
        size=rows.size,
        value_weight=origin.ranking.value_weight,
        context=body.cell,
        model_version=origin.model_version,
        built_ms=now_ms,
    )
    return Response(encode_pool(pool), media_type=POOL_MEDIA_TYPE)
