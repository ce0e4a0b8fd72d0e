"""``GET /v1/internal/users/{user_id}/state`` (service token): what an edge needs to rank for
a user itself (``protocol.user_model_wire``): their model from the stream workers' record
(``u:{id}:st``) and their stated preferences (``u:{id}:pref``), read in one round trip.

200 with the state (version 0 and no model for a user the workers have not written);
503 when Redis cannot be read within the feature-read budget (the edge then asks the
origin to rank, as before).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

from fastapi import APIRouter, Path
from redis.exceptions import RedisError
from starlette.responses import Response

from origin.http.inputs import OriginOf
from origin.learned import stated_preferences
from origin.learned.user_models import decode_record
from protocol import keys
from protocol.exceptions import ApiError, MalformedMessage
from protocol.user_model_wire import STATE_MEDIA_TYPE, UserModelWire, encode_user_model
from relevance.user_model import model_bytes
from web.openapi import declared

log = logging.getLogger(__name__)

user_model_router = APIRouter()

STATE_PATH = "/v1/internal/users/{user_id}/state"
# As every feature read of a request: the edge is waiting.
READ_TIMEOUT_S = 0.1


@user_model_router.get(
    STATE_PATH,
    response_class=Response,
    responses={
        200: {"content": {STATE_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}}},
        **declared(503),
    },
)
async def user_model(
    user_id: Annotated[str, Path(min_length=1, max_length=200)], origin: OriginOf
) -> Response:
    """The user's model and preferences, for an edge to rank for them."""

    async def read() -> list[object]:
        async with origin.redis.pipeline(transaction=False) as pipe:
            pipe.get(keys.user_record(user_id))
            stated_preferences.queue_read(pipe, user_id)
            replies: list[object] = await pipe.execute()
            return replies

    try:
        raw, fields = await asyncio.wait_for(read(), READ_TIMEOUT_S)
    except (RedisError, TimeoutError) as exc:
        log.warning("user model of %s not read: %r", user_id, exc)
        raise ApiError(
            503, "unavailable", "the user's model could not be read", retry_after_s=1
        ) from exc
    try:
        record = decode_record(raw, origin.settings.embedding_dim)  # type: ignore[arg-type]
    except MalformedMessage as exc:
        log.warning("user record of %s unreadable: %s", user_id, exc)
        raise ApiError(
            503, "unavailable", "the user's model could not be read", retry_after_s=1
        ) from exc
    state = UserModelWire(
        user_id=user_id,
        version=record.version,
        model=model_bytes(record.model) if record.model is not None else None,
        preferences=stated_preferences.decode(fields),  # type: ignore[arg-type]
        preferences_version=stated_preferences.version_of(fields),  # type: ignore[arg-type]
    )
    return Response(encode_user_model(state), media_type=STATE_MEDIA_TYPE)
