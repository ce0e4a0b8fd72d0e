"""``/v1/admin/services``: the service identities the origins accept (``PERSO_ORIGIN_TOKEN``
as ``shared``, and each of ``PERSO_SERVICE_TOKENS``), and their revocation
(``origin.service_identities``). Admin token. A revocation is in Redis: every origin refuses
the identity within about a second, this one at once; a restore undoes it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import BaseModel
from redis.exceptions import RedisError
from starlette.responses import Response

from origin.http.inputs import OriginOf
from origin.runtime import Origin
from protocol.exceptions import ApiError
from redis_client.client import RedisClient
from web.openapi import declared
from web.responses import json_response

services_router = APIRouter()

ServiceName = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_-]*$")]


class ServiceIdentity(BaseModel):
    name: str
    revoked: bool


class ServiceIdentities(BaseModel):
    identities: list[ServiceIdentity]


def _listed(origin: Origin) -> ServiceIdentities:
    services = origin.services
    return ServiceIdentities(
        identities=[
            ServiceIdentity(name=name, revoked=name in services.revoked)
            for name in services.names()
        ]
    )


async def _changed(
    origin: Origin, name: str, change: Callable[[RedisClient, str], Awaitable[None]]
) -> Response:
    """``change`` (revoke or restore) made to the known identity ``name``; the list after."""
    if name not in origin.services.names():
        raise ApiError(404, "not_found", f"no service identity named {name!r}", field="name")
    try:
        await change(origin.redis, name)
    except RedisError as exc:
        raise ApiError(
            503, "redis_unavailable", f"revocations not written: {exc!r}; retry", retry_after_s=1
        ) from exc
    return json_response(_listed(origin))


@services_router.get(
    "/v1/admin/services", response_class=Response, responses={200: {"model": ServiceIdentities}}
)
async def list_services(origin: OriginOf) -> Response:
    """Every service identity this origin accepts, and whether it is revoked."""
    return json_response(_listed(origin))


@services_router.post(
    "/v1/admin/services/{name}/revoke",
    response_class=Response,
    responses={200: {"model": ServiceIdentities}, **declared(404, 503)},
)
async def revoke(name: ServiceName, origin: OriginOf) -> Response:
    """Refuse ``name``'s token from now on, on every origin (here at once, elsewhere within
    about a second); the others are untouched."""
    return await _changed(origin, name, origin.services.revoke)


@services_router.post(
    "/v1/admin/services/{name}/restore",
    response_class=Response,
    responses={200: {"model": ServiceIdentities}, **declared(404, 503)},
)
async def restore(name: ServiceName, origin: OriginOf) -> Response:
    """Accept ``name``'s token again."""
    return await _changed(origin, name, origin.services.restore)
