"""``POST /v1/feedback``: accepted feedback is durable before the answer leaves.

One pipeline: the events appended to the user's ``events:{p}`` partition (the durable part,
deduplicated by interaction id), the interactions recorded in the user's history, and, when
replicas must confirm the events (``PERSO_REDIS_WAIT_REPLICAS``), a bounded ``WAIT`` on the
partition's node; the stream workers learn from the events (``origin.worker``). Then every
region's edges hear what invalidates (a purchase drops the buyer's entries).

A Redis failure, or too few replicas confirming in time, is tried again (``append_retry``:
20 ms doubling to 500 ms, jittered) for ``PERSO_FEEDBACK_RETRY_MS`` (3 s, above a Redis
Cluster's promotion window): the pipeline is idempotent, so a repeat completes what was
missing and repeats nothing. Past it the answer is a 503 with ``Retry-After``: nothing was
acknowledged (the edge then holds the request on its disk, ``edge.origins.feedback_spool``).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter
from redis.exceptions import RedisError
from starlette.responses import Response

from invalidation.rules import Feedback
from origin.http.inputs import JsonBody, OriginOf
from origin.ranking import history
from origin.ranking.history import interactions_of
from origin.runtime import Origin
from protocol.api import FeedbackRequest, FeedbackResponse
from protocol.exceptions import ApiError
from redis_client.durable import NotReplicated
from resilience.backoff import jittered, step
from web.openapi import declared
from web.responses import elapsed_ms, json_response

log = logging.getLogger(__name__)

# The append's retries: the first pause at most 20 ms, doubling up to 500 ms.
RETRY_BASE_S = 0.02
RETRY_CAP_S = 0.5

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
        await append_retry(origin, lambda: record_feedback(origin, body))
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


async def append_retry(origin: Origin, append: Callable[[], Awaitable[None]]) -> None:
    """``append``, tried again after a Redis failure until ``PERSO_FEEDBACK_RETRY_MS`` has
    passed since the first try; the last failure raised past it."""
    deadline = origin.clock() + origin.settings.feedback_retry_ms / 1000
    for attempt in itertools.count():
        try:
            await append()
            return
        except RedisError as exc:
            pause = jittered(step(attempt, RETRY_BASE_S, RETRY_CAP_S), origin.sample(), "full")
            if origin.clock() + pause >= deadline:
                raise
            log.info("feedback append failed (%r); again in %.0f ms", exc, pause * 1000)
            await origin.sleep(pause)


async def record_feedback(origin: Origin, body: FeedbackRequest) -> None:
    """Append the events durably and record the interactions, in one pipeline. Both are
    idempotent, so a retry after a failure (503) completes what was missing and repeats
    nothing. What the events teach (the user's model, the items' posteriors) is the stream
    workers' to apply."""
    user_id = body.user_id
    events = origin.feedback.events_of(body)
    async with origin.redis.pipeline(transaction=False) as pipe:
        await origin.feedback.queue_append(pipe, user_id, events)
        history.queue_interactions_write(pipe, user_id, interactions_of(events, origin.index))
        waits = origin.feedback.queue_replication(pipe, user_id)
        replies = await pipe.execute()
    if waits:
        origin.feedback.durability.check(replies[-1])
