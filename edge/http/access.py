"""Who may call an edge's internal routes (``/v1/internal/...``).

Whoever holds the service token, ``PERSO_ORIGIN_TOKEN`` as bearer token: the token edges
present to the origin, which the stack's operators and tools hold too (``perso up``
publishes it in ``stack.json``). Unlike the open health, readiness and metrics routes,
internal routes name users, so they are never open: with no token configured they answer
401. ``edge.http.asgi.EdgeFront`` checks this from the headers alone, before any route runs (as
the origin's ``origin.http.auth`` does); the secret is compared in constant time.
"""

from __future__ import annotations

import hmac

from pydantic import SecretStr

from edge.identity import FIELD, bearer
from protocol.exceptions import ApiError

INTERNAL_PREFIX = "/v1/internal/"


def is_internal(path: str) -> bool:
    return path.startswith(INTERNAL_PREFIX)


def check_service(authorization: str | None, expected: SecretStr | None) -> None:
    """``ApiError(401)`` unless ``authorization`` carries the service token; always when
    none is configured."""
    if expected is None:
        raise ApiError(
            401, "unauthorized", "internal routes disabled: set PERSO_ORIGIN_TOKEN", field=FIELD
        )
    presented = bearer(authorization)
    secret = expected.get_secret_value().encode()
    if presented is None or not hmac.compare_digest(presented.encode(), secret):
        raise ApiError(401, "unauthorized", "missing or invalid service token", field=FIELD)
