"""Credentials the origin checks: the edges' service token and the admin token.

Both are bearer tokens compared in constant time. The service token (``PERSO_ORIGIN_TOKEN``)
is shared by the edges of one deployment; when it is unset the origin API is open (a
development set-up; ``perso up`` always sets one). Admin endpoints are never open: without
``PERSO_ADMIN_TOKEN`` they answer 401.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request
from pydantic import SecretStr

from origin.state import Origin
from protocol.exceptions import ApiError

AUTHORIZATION = "authorization"
_SCHEME = "bearer "


def bearer_token(request: Request) -> str | None:
    header = request.headers.get(AUTHORIZATION)
    if header is None or not header.lower().startswith(_SCHEME):
        return None
    return header[len(_SCHEME) :].strip() or None


def _matches(presented: str | None, expected: SecretStr) -> bool:
    if presented is None:
        return False
    return hmac.compare_digest(presented.encode(), expected.get_secret_value().encode())


def check_service(request: Request, expected: SecretStr | None) -> None:
    """401 unless the request carries the service token (or none is configured)."""
    if expected is None:
        return
    if not _matches(bearer_token(request), expected):
        raise ApiError(
            401, "unauthorized", "missing or invalid service token", field="authorization"
        )


def check_admin(request: Request, expected: SecretStr | None) -> None:
    """401 unless the request carries the admin token; always 401 when none is configured."""
    if expected is None:
        raise ApiError(
            401, "unauthorized", "admin API disabled: set PERSO_ADMIN_TOKEN", field="authorization"
        )
    if not _matches(bearer_token(request), expected):
        raise ApiError(401, "unauthorized", "missing or invalid admin token", field="authorization")


async def service_caller(request: Request) -> Origin:
    """The origin, once the caller proved to be an edge (a dependency: it runs before the
    body is read, so an unauthorised caller learns nothing about it). ``async`` so that
    FastAPI calls it on the event loop, not in its thread pool."""
    origin: Origin = request.app.state.origin
    check_service(request, origin.settings.origin_token)
    return origin


async def admin_caller(request: Request) -> Origin:
    """The origin, once the caller proved to be an admin (before the body is read)."""
    origin: Origin = request.app.state.origin
    check_admin(request, origin.settings.admin_token)
    return origin


# Route parameters: ``origin: ServiceCaller`` / ``origin: AdminCaller``.
ServiceCaller = Annotated[Origin, Depends(service_caller)]
AdminCaller = Annotated[Origin, Depends(admin_caller)]
