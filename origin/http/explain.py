"""``POST /v1/explain`` on the origin (the explain API): why an item suits a user,
from the LLM tier (``origin.llm.tier``) or its templates.

    {"user_id": "u-42", "item_id": "it-000042",
     "context": {"page_type": "item_detail", "explanation_style": "concise"}}

The answer is the explain API's, ``llm_generated`` saying where it came from; it is never a 5xx
because of the model. New and casual users, and the fills an edge asks for a whole segment
(``x-perso-fill-scope: segment``), get a *segment* explanation: built from nothing of the
user's but their segment, cached per segment, and marked ``x-perso-explain-scope: segment``
so that edges may cache it too. Active and power users get a personal one.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Request
from starlette.responses import Response

from origin.http.feature_reads import read_user
from origin.http.inputs import JsonBody, OriginOf
from origin.llm.model import Explanation
from origin.llm.summaries import (
    evidence_for,
    item_summary,
    recommendation_summary,
    user_summary,
)
from origin.llm.tier import ExplainInput
from origin.ranking.emotion import NEUTRAL, emotional_state
from protocol.api import (
    EXPLAIN_SCOPE_HEADER,
    FILL_SCOPE_HEADER,
    SEGMENT_HEADER,
    SEGMENT_SCOPE,
    ExplainRequest,
    ExplainResponse,
    ExplanationFactor,
    ItemExplanation,
)
from protocol.exceptions import ApiError
from protocol.segments import Segment
from web.openapi import declared
from web.responses import elapsed_ms, json_response

explain_router = APIRouter()

# Segments whose explanations are shared: too little history to say anything personal
# (casual users' rankings are their own, from their first signal; a sentence about their
# history waits until there is some).
SHARED_SEGMENTS = frozenset({Segment.NEW, Segment.CASUAL})
# What an explain request may take besides the model's own deadline (the LLM latency
# budget: a 200 ms LLM path inside the request).
OVERHEAD_BUDGET_MS = 50.0


@explain_router.post(
    "/v1/explain",
    response_class=Response,
    responses={200: {"model": ExplainResponse}, **declared(404)},
)
async def explain(
    body: Annotated[ExplainRequest, JsonBody.of(ExplainRequest)],
    request: Request,
    origin: OriginOf,
) -> Response:
    started = time.perf_counter()
    index = origin.index
    row = index.row_of.get(body.item_id)
    if row is None:
        raise ApiError(
            404, "not_found", f"no item {body.item_id!r} in the catalog", field="item_id"
        )
    now_ms = origin.now_ms()
    fill = request.headers.get(FILL_SCOPE_HEADER) == SEGMENT_SCOPE
    user = await read_user(origin, body.user_id, None)
    state = user.state
    segment = state.segment(now_ms)
    if fill:
        segment = _segment(request.headers.get(SEGMENT_HEADER), segment)
    personal = not fill and segment not in SHARED_SEGMENTS and not user.failed
    page_type = body.context.page_type
    session = state.session(now_ms, origin.settings.session_idle_s * 1000)
    emotion = emotional_state(session, page_type, now_ms) if personal else NEUTRAL
    evidence = evidence_for(state, index, row)
    summary = user_summary(
        state,
        index,
        row,
        segment=segment.value,
        preferences=user.preferences if personal else {},
        emotion=emotion,
    )
    outcome = await origin.llm.explain(
        ExplainInput(
            user=summary,
            item=item_summary(index, row),
            rec=recommendation_summary(index, row, evidence, personal=personal),
            style=body.context.explanation_style,
            personal=personal,
            explanation_requested=True,
            page_type=page_type.value if page_type else None,
        ),
        budget_ms=origin.settings.llm_timeout_ms + OVERHEAD_BUDGET_MS,
    )
    answer = ExplainResponse(
        item_id=body.item_id,
        explanation=to_api(outcome.explanation),
        latency_ms=elapsed_ms(started),
    )
    response = json_response(answer)
    if not personal:
        response.headers[EXPLAIN_SCOPE_HEADER] = f"{SEGMENT_SCOPE}:{segment.value}"
    return response


def to_api(explanation: Explanation) -> ItemExplanation:
    return ItemExplanation(
        headline=explanation.headline,
        detailed=explanation.detailed,
        factors=[
            ExplanationFactor(factor=f.name, weight=f.weight, description=f.description)
            for f in explanation.factors
        ],
        llm_generated=explanation.llm_generated,
    )


def _segment(given: str | None, own: Segment) -> Segment:
    """The segment an edge names for its fill; the user's own when it names none we know."""
    try:
        return Segment(given) if given else own
    except ValueError:
        return own
