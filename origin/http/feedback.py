"""``POST /v1/feedback``: accepted feedback is durable before the answer leaves.

One pipeline: the events appended to the user's ``events:{p}`` partition (the durable part,
deduplicated by interaction id), the interactions recorded in the user's history, and, when
replicas must confirm the events (``PERSO_REDIS_WAIT_REPLICAS``), a bounded ``WAIT`` on the
partition's node; the stream workers learn from the events (``origin.worker``). Then every
region's edges hear what invalidates (a purchase drops the buyer's entries). A Redis
failure, or too few replicas confirming in time, is a 503 with ``Retry-After``: nothing was
acknowledged, and the retry completes what was missing without repeating anything.
"""

from __future__ import annotations

import logging
import time
from typing import Annotated

from fastapi import APIRouter
from redis.exceptions import RedisError
from starlette.responses import Response

from invalidation.rules import Feedback
from origin.http.inputs import JsonBody, OriginOf
from origin.ranking import history as user_state
from origin.ranking.history import interactions_of
from origin.runtime import Origin
from protocol.api import FeedbackRequest, FeedbackResponse
from protocol.exceptions import ApiError
from protocol.openapi import declared
from protocol.responses import elapsed_ms, json_response
from redis_client.durable import NotReplicated

log = logging.getLogger(__name__)

feedback_router = APIRouter()


@feedback_router.post(
    "/v1/feedback",
    response_class=Response,
    responses={200: {"model": FeedbackResponse}, **declared(429, 503)},
)
async def feedback(
    body: Annotated[FeedbackRequest, JsonBody.of(FeedbackRequest)], origin: OriginOf
) -> Response:
    started = time.perf_counter()
    if origin.inflight >= origin.settings.origin_max_inflight:
        raise ApiError(429, "overloaded", "too many requests in flight; retry", retry_after_s=1)
    origin.inflight += 1
    try:
        await record_feedback(origin, body)
    except NotReplicated as exc:
        log.warning("feedback not acknowledged: %s", exc)
        raise ApiError(
            503, "unavailable", "feedback not yet replicated; retry", retry_after_s=1
        ) from exc
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
    """Append the events durably and record the interactions, in one pipeline. Both are
    idempotent, so a retry after a failure (503) completes what was missing and repeats
    nothing. What the events teach (the user's model, the items' posteriors) is the stream
    workers' to apply."""
    user_id = body.user_id
    events = origin.feedback.events_of(body)
    async with origin.redis.pipeline(transaction=False) as pipe:
        await origin.feedback.queue_append(pipe, user_id, events)
        user_state.queue_interactions_write(pipe, user_id, interactions_of(events, origin.index))
        waits = origin.feedback.queue_replication(pipe, user_id)
        replies = await pipe.execute()
    if waits:
        origin.feedback.durability.check(replies[-1])
