"""What an edge does with ``/v1/feedback``, free of any framework: the user token checked
locally (401), the body validated (400, client times against the edge's clock), its
``user_id`` the token's (403), the tier's rate limit (429), then the body forwarded to
the origin, which acknowledges once the events are durable; when no origin can take it
now, the request is held on the edge's disk and handed on later (202, ``"held"``:
``edge.origins.feedback_spool``), and refused only when that cannot be either (503,
nothing accepted). Accepted interactions update what the edge knows of the user (from
now on, they are known: ranked by their own model), and their next entry is pre-warmed
once the worker has folded them in (unless the edge ranks them itself from its pools).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime

from edge.exceptions import OriginRejected, OriginUnavailable
from edge.identity import require_same_user
from edge.node import Edge
from edge.serve.answer import JSON, Answer, over_the_limit, tier_of
from edge.serve.fill import prewarm
from protocol.api import FeedbackRequest, FeedbackResponse
from protocol.events import derive_interaction_id, epoch_ms
from protocol.exceptions import ApiError
from protocol.segments import is_known
from protocol.tiers import FEEDBACK
from web.request_body import parse_json

log = logging.getLogger(__name__)


async def feedback(edge: Edge, headers: Mapping[str, str], raw: bytes) -> Answer:
    started = time.perf_counter()
    claims = edge.verifier.claims(headers.get("authorization"))
    body: FeedbackRequest = parse_json(FeedbackRequest, raw, now=edge.clock())
    require_same_user(claims, body.user_id)
    decision = await edge.check_limit(tier_of(claims), FEEDBACK, body.user_id, claims.api_key)
    if not decision.allowed:
        edge.counters.rate_limited += 1
        raise over_the_limit(decision, claims)
    forwarded = body.model_dump_json(exclude_none=True).encode()
    status = 200
    try:
        accepted = await edge.origin.feedback(forwarded)
    except OriginUnavailable as exc:
        log.log(exc.log_level, "feedback not forwarded: %s", exc)
        spool = edge.feedback_spool
        if spool is None or not await spool.hold(as_held(body, edge.clock())):
            raise ApiError(
                503, "origin_unavailable", "feedback not accepted; retry", retry_after_s=1
            ) from exc
        # Durable on the edge's disk, handed on when the origin can take it.
        status = 202
        accepted = FeedbackResponse(status="held", processed=len(body.feedback), latency_ms=0)
    except OriginRejected as exc:
        return Answer(exc.status, exc.body, [("content-type", JSON)])
    edge.views.record(
        body.user_id,
        [item.item_id for item in body.feedback],
        [item.timestamp.timestamp() if item.timestamp else None for item in body.feedback],
    )
    # The user's next answer: ranked here from the pool when the edge ranks (nothing to
    # pre-warm), else their personal entry, pre-warmed.
    ranks_here = edge.rank_at_edge and edge.user_models is not None
    if not ranks_here and is_known(edge.views.snapshot(body.user_id).segment):
        edge.prewarmer.schedule(body.user_id, lambda last: prewarm(edge, last))
    latency = round((time.perf_counter() - started) * 1000, 3)
    payload = accepted.model_copy(update={"latency_ms": latency}).model_dump_json().encode()
    return Answer(status, payload, [("content-type", JSON)])


def as_held(body: FeedbackRequest, now_s: float) -> bytes:
    """``body`` as the spool holds it, to be handed on later: each interaction with the id
    the origin would derive for it now (so that, if this attempt was recorded after all,
    the later one is recognised as the same), and the moment the edge took it as its time
    when the shop sent none (not the later moment the origin will take it)."""
    now = datetime.fromtimestamp(now_s, UTC)
    items = [
        item.model_copy(
            update={
                "interaction_id": item.interaction_id
                or derive_interaction_id(
                    body.user_id,
                    item.item_id,
                    item.action.value,
                    session_id=body.session_id,
                    request_id=body.request_id,
                    timestamp_ms=epoch_ms(item.timestamp) if item.timestamp else None,
                ),
                "timestamp": item.timestamp or now,
            }
        )
        for item in body.feedback
    ]
    held = body.model_copy(update={"feedback": items})
    return held.model_dump_json(exclude_none=True).encode()
