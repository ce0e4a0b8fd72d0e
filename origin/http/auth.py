"""Who may call which route of the origin, checked before anything else of a request.

One table (``credential_for``) says, by path, what a caller must prove:

- nothing: health, readiness, dependencies, metrics and the API's own description; the
  operations page's shell (``/ops`` and its three files, ``origin.http.ops``): it holds no
  figure and asks the operator for the admin token, with which it then calls
  ``/v1/admin/ops`` (admin, below). Opening the shell lets a browser load it without a
  header it cannot send on navigation; what it shows stays behind the admin token;
- ``/v1/auth/token``: a customer's backend, with an API key in ``X-API-Key``
  (``origin.api_keys``);
- ``/v1/admin/*``: an operator, with ``PERSO_ADMIN_TOKEN`` as bearer token; never open
  (without one configured they answer 401);
- any other path: an edge, with a service token as bearer token: ``PERSO_ORIGIN_TOKEN``,
  or its own of ``PERSO_SERVICE_TOKENS`` unless revoked (``origin.service_identities``);
  open when none is configured (a development set-up; ``perso up`` always sets one). A
  route nobody added to the table is therefore closed to strangers, not open by accident.

``Access``, the origin's outermost middleware, applies the table from the headers alone:
a caller without valid credentials gets its 401 whatever its body, which is never read.
(FastAPI reads and parses a body before any dependency of the route could refuse the
caller, so a dependency cannot do this.) Secrets are compared in constant time. The same
table writes every operation's security in the OpenAPI document (``origin.http.openapi``).
"""

from __future__ import annotations

import hmac
from enum import StrEnum

from pydantic import SecretStr
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from origin.api_keys import ApiKey, find_key
from origin.http.ops import PAGE_FILES
from origin.runtime import Origin
from origin.service_identities import ServiceIdentities
from protocol.exceptions import ApiError
from web.problems import error_response

AUTHORIZATION = "authorization"
API_KEY_HEADER = "x-api-key"
_SCHEME = "bearer "
# Where ``Access`` leaves the API key it found, for the token route (the request's state).
_API_KEY_STATE = "api_key"


class Credential(StrEnum):
    NONE = "none"
    API_KEY = "api_key"  # X-API-Key: a customer's backend
    ADMIN = "admin"  # bearer PERSO_ADMIN_TOKEN: an operator
    SERVICE = "service"  # bearer PERSO_ORIGIN_TOKEN: an edge


PUBLIC_PATHS = frozenset(
    {
        "/healthz",
        "/readyz",
        "/dependencies",
        "/metrics",
        "/openapi.json",
        "/docs",
        "/docs/oauth2-redirect",
        "/redoc",
        *PAGE_FILES,
    }
)
TOKEN_PATH = "/v1/auth/token"
ADMIN_PREFIX = "/v1/admin/"


def credential_for(path: str) -> Credential:
    """What a caller of ``path`` must prove (the table above)."""
    if path in PUBLIC_PATHS:
        return Credential.NONE
    if path == TOKEN_PATH:
        return Credential.API_KEY
    if path.startswith(ADMIN_PREFIX):
        return Credential.ADMIN
    return Credential.SERVICE


def bearer_token(headers: Headers) -> str | None:
    header = headers.get(AUTHORIZATION)
    if header is None or not header.lower().startswith(_SCHEME):
        return None
    return header[len(_SCHEME) :].strip() or None


def _matches(presented: str | None, expected: SecretStr) -> bool:
    if presented is None:
        return False
    return hmac.compare_digest(presented.encode(), expected.get_secret_value().encode())


def check_service(headers: Headers, services: ServiceIdentities) -> None:
    """401 unless the request carries a service token (``PERSO_ORIGIN_TOKEN`` or one of
    ``PERSO_SERVICE_TOKENS``) whose identity is not revoked; open when none is configured."""
    if services.open:
        return
    name = services.identify(bearer_token(headers))
    if name is None:
        raise ApiError(401, "unauthorized", "missing or invalid service token", field=AUTHORIZATION)
    if name in services.revoked:
        raise ApiError(
            401, "unauthorized", f"service identity {name!r} is revoked", field=AUTHORIZATION
        )


def check_admin(headers: Headers, expected: SecretStr | None) -> None:
    """401 unless the request carries the admin token; always 401 when none is configured."""
    if expected is None:
        raise ApiError(
            401, "unauthorized", "admin API disabled: set PERSO_ADMIN_TOKEN", field=AUTHORIZATION
        )
    if not _matches(bearer_token(headers), expected):
        raise ApiError(401, "unauthorized", "missing or invalid admin token", field=AUTHORIZATION)


def check_api_key(headers: Headers, keys: tuple[ApiKey, ...]) -> ApiKey:
    """The API key the request carries; 401 unless it is one of ``keys``."""
    key = find_key(headers.get(API_KEY_HEADER), keys)
    if key is None:
        raise ApiError(401, "unauthorized", "missing or invalid API key", field=API_KEY_HEADER)
    return key


class Access:
    """ASGI middleware: the credential of ``credential_for`` or a 401, before the body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        credential = credential_for(scope["path"])
        if credential is not Credential.NONE:
            origin: Origin = scope["app"].state.origin
            headers = Headers(scope=scope)
            try:
                if credential is Credential.SERVICE:
                    check_service(headers, origin.services)
                elif credential is Credential.ADMIN:
                    check_admin(headers, origin.settings.admin_token)
                else:
                    key = check_api_key(headers, origin.api_keys)
                    scope.setdefault("state", {})[_API_KEY_STATE] = key
            except ApiError as exc:
                answer = error_response(exc.status, exc.error, exc.reason, field=exc.field)
                await answer(scope, receive, send)
                return
        await self.app(scope, receive, send)


def api_key_of(request: Request) -> ApiKey:
    """The API key ``Access`` found on a request to ``TOKEN_PATH``."""
    key: ApiKey = getattr(request.state, _API_KEY_STATE)
    return key
