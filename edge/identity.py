"""Who is calling the edge: the user token of ``Authorization: Bearer``, verified locally.

``protocol.identity`` checks the signature; this adds what an edge needs on its hot path:
a bounded cache of tokens already verified (a browser sends the same token with every
request; the cache saves the HMAC and the JSON, and still checks the expiry every time),
and the 401 / 403 answers. A body's ``user_id`` must be the token's user: a user cannot
read another's personalization or send feedback as them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

from protocol import identity
from protocol.exceptions import ApiError
from protocol.identity import Claims, InvalidCredential

_SCHEME = "bearer "
FIELD = "authorization"


def bearer(header: str | None) -> str | None:
    if header is None or len(header) <= len(_SCHEME) or header[:7].lower() != _SCHEME:
        return None
    return header[len(_SCHEME) :].strip() or None


class Verifier:
    def __init__(
        self, keys: Sequence[bytes], *, clock: Callable[[], float], max_cached: int = 100_000
    ) -> None:
        if not keys:
            raise ValueError("an edge needs PERSO_IDENTITY_KEYS to verify its callers")
        self._keys = tuple(keys)
        self._clock = clock
        self._max_cached = max_cached
        self._verified: OrderedDict[str, Claims] = OrderedDict()

    def claims(self, authorization: str | None) -> Claims:
        """The caller's claims; ``ApiError(401)`` saying what is wrong otherwise."""
        token = bearer(authorization)
        if token is None:
            raise ApiError(401, "unauthorized", "missing bearer token (a user token)", field=FIELD)
        now = self._clock()
        cached = self._verified.get(token)
        if cached is not None:
            if cached.expires_at > now:
                return cached
            del self._verified[token]
        try:
            claims = identity.verify(token, self._keys, now_s=now)
        except InvalidCredential as exc:
            raise ApiError(
                401, "unauthorized", f"invalid token: {exc.reason}", field=FIELD
            ) from exc
        self._verified[token] = claims
        if len(self._verified) > self._max_cached:
            self._verified.popitem(last=False)
        return claims


def require_same_user(claims: Claims, user_id: str) -> None:
    if claims.user_id != user_id:
        raise ApiError(
            403, "forbidden", "user_id is not the user of the credential", field="user_id"
        )
