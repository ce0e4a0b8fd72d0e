"""``POST /v1/auth/token``: user tokens for the customers' backends (protocol.identity).

The caller proves itself with an API key (``X-API-Key``, origin.api_keys), checked by
``origin.http.auth.Access`` before the body is read; the token
carries the user, the user's segment now (from their recorded interactions), the key's
rate-limit tier and an expiry. Edges verify it without calling anyone. The segment in a
token is a starting point: an edge that has seen the user's feedback knows better.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Request
from redis.exceptions import RedisError
from starlette.responses import Response

from origin.http.auth import api_key_of
from origin.http.inputs import JsonBody, OriginOf
from origin.ranking import history
from protocol import identity
from protocol.api import TokenRequest, TokenResponse
from protocol.exceptions import ApiError
from protocol.segments import Segment
from web.openapi import declared
from web.responses import json_response

tokens_router = APIRouter()


@tokens_router.post(
    "/v1/auth/token",
    response_class=Response,
    responses={200: {"model": TokenResponse}, **declared(503)},
)
async def issue_token(
    body: Annotated[TokenRequest, JsonBody.of(TokenRequest)],
    request: Request,
    origin: OriginOf,
) -> Response:
    settings = origin.settings
    api_key = api_key_of(request)
    signing = settings.identity_key_list
    if not signing:
        raise ApiError(
            503, "identity_disabled", "no PERSO_IDENTITY_KEYS configured; tokens unavailable"
        )
    now_s = origin.clock()
    try:
        state = await history.read_history(origin.redis, body.user_id)
        segment = state.segment(int(now_s * 1000))
    except RedisError:
        segment = Segment.NEW  # the edge learns the real one from the user's feedback
    issued = int(now_s)
    claims = identity.Claims(
        user_id=body.user_id,
        segment=segment,
        tier=api_key.tier.value,
        api_key=api_key.name,
        issued_at=issued,
        expires_at=issued + (body.ttl_s or settings.token_ttl_s),
    )
    token = identity.issue(claims, signing[0])
    return json_response(
        TokenResponse(
            token=token,
            user_id=claims.user_id,
            segment=segment.value,
            tier=claims.tier,
            expires_at=datetime.fromtimestamp(claims.expires_at, UTC),
        )
    )
