"""``POST /v1/preferences`` (service token, like ``/v1/feedback``): a user's explicit
preference for a catalog category, applied under the user's lock (``origin.ranking.preferences``)
and announced to every region, whose edges then drop the user's entries.

    {"user_id": "u-42", "category": "electronics", "direction": "negative", "strength": 1}

answers with all of the user's preferences after the change:

    {"user_id": "u-42", "preferences": [{"category": "electronics",
     "direction": "negative", "strength": 1.0}], "latency_ms": 1.2}

400: bad input or a category the catalog does not have (``field`` names it); 422: a new
category beyond the per-user cap; 409: another change of the same user held the lock
throughout, or this one's lease lapsed before its write (retry); 503: Redis unavailable.
Nothing is written in any of those cases.
"""

from __future__ import annotations

import logging
import time
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from redis.exceptions import RedisError
from starlette.responses import Response

from coordination.exceptions import LockNotAcquired, StaleFencingToken
from invalidation.rules import PreferenceChange
from origin.exceptions import TooManyPreferences
from origin.http.inputs import JsonBody
from origin.ranking.preferences import CategoryChange, PreferenceStore, listed
from origin.runtime import Origin
from protocol.api import PreferenceRequest, PreferencesResponse
from protocol.exceptions import ApiError
from web.openapi import declared
from web.responses import elapsed_ms, json_response

log = logging.getLogger(__name__)

preferences_router = APIRouter()


async def preference_store(request: Request) -> PreferenceStore:
    """The store over the origin's Redis and lock (so its leases show in the lock metrics
    and the admin lock status). Made on first use and kept; an app may set its own
    (``app.state.preferences``, a test does for a smaller cap)."""
    origin: Origin = request.app.state.origin
    store: PreferenceStore | None = getattr(request.app.state, "preferences", None)
    if store is None:
        store = PreferenceStore(origin.redis, origin.lock)
        request.app.state.preferences = store
    return store


@preferences_router.post(
    "/v1/preferences",
    response_class=Response,
    responses={200: {"model": PreferencesResponse}, **declared(409, 422, 503)},
)
async def set_preference(
    body: Annotated[PreferenceRequest, JsonBody.of(PreferenceRequest)],
    request: Request,
    store: Annotated[PreferenceStore, Depends(preference_store)],
) -> Response:
    started = time.perf_counter()
    origin: Origin = request.app.state.origin
    if origin.index.category_code(body.category) is None:
        raise ApiError(
            400, "invalid_request", f"unknown category {body.category!r}", field="category"
        )
    change = CategoryChange(body.category, body.direction, body.strength)
    try:
        strengths = await store.change(body.user_id, change)
    except TooManyPreferences as exc:
        raise ApiError(422, "too_many_preferences", str(exc), field="category") from exc
    except LockNotAcquired as exc:
        raise ApiError(
            409,
            "conflict",
            "another change of this user's preferences is in progress; retry",
            retry_after_s=1,
        ) from exc
    except StaleFencingToken as exc:
        raise ApiError(
            409, "conflict", "the change took longer than its lock; nothing written; retry"
        ) from exc
    except RedisError as exc:
        log.error("preference of %s not recorded: %r", body.user_id, exc)
        raise ApiError(
            503, "unavailable", "preference store unavailable; retry", retry_after_s=1
        ) from exc
    # Best effort, after the write: a lost announcement leaves the user's edge entries to
    # their TTLs.
    await origin.announce([PreferenceChange(body.user_id)])
    answer = PreferencesResponse(
        user_id=body.user_id, preferences=listed(strengths), latency_ms=elapsed_ms(started)
    )
    return json_response(answer)
