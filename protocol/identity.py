"""User credentials an edge verifies locally: HMAC-signed tokens the origin issues.

A browser never tells the edge who it is in a bare field. The customer's backend asks
the origin for a token for its signed-in user (``POST /v1/auth/token`` with its API key);
the browser presents it to the edge as ``Authorization: Bearer <token>``. The edge checks
the signature with a key it shares with the origin (``PERSO_IDENTITY_KEYS``): no network
call, no lookup. The token says who the user is, their segment when it was issued, the
rate-limit tier of the API key that asked for it, and when it expires.

    token   = "v1." + b64url(payload) + "." + b64url(HMAC-SHA256(key, "v1." + b64url(payload)))
    payload = {"sub": user_id, "seg": segment, "tier": tier, "kid": api_key_name,
               "iat": issued_at_s, "exp": expires_at_s}   (JSON)

Several keys may be configured: the first signs, every one verifies, so a key is rotated
by adding the new one first and removing the old one once its tokens have expired.
Signatures are compared in constant time. Pure functions; the caller passes the time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from protocol.exceptions import PersoError
from protocol.segments import Segment

VERSION = "v1"
_PREFIX = VERSION + "."
MAX_TOKEN_CHARS = 2048  # a header longer than this is not one of ours
MIN_KEY_BYTES = 16


class InvalidCredential(PersoError):
    """The token is missing, malformed, forged or expired; ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Claims:
    user_id: str
    segment: Segment
    tier: str  # a protocol.tiers.Tier value; the verifier does not interpret it
    api_key: str  # the name (never the secret) of the API key that asked for the token
    issued_at: int  # unix seconds
    expires_at: int


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _sign(key: bytes, signed: str) -> bytes:
    return hmac.new(key, signed.encode("ascii"), hashlib.sha256).digest()


def issue(claims: Claims, key: bytes) -> str:
    """The token carrying ``claims``, signed with ``key``."""
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"identity keys must be at least {MIN_KEY_BYTES} bytes")
    payload = orjson.dumps(
        {
            "sub": claims.user_id,
            "seg": claims.segment.value,
            "tier": claims.tier,
            "kid": claims.api_key,
            "iat": claims.issued_at,
            "exp": claims.expires_at,
        }
    )
    signed = _PREFIX + _b64encode(payload)
    return signed + "." + _b64encode(_sign(key, signed))


def verify(token: str, keys: Sequence[bytes], *, now_s: float) -> Claims:
    """The claims of a genuine, unexpired token; ``InvalidCredential`` otherwise."""
    if not token or len(token) > MAX_TOKEN_CHARS:
        raise InvalidCredential("malformed token")
    if not token.startswith(_PREFIX):
        raise InvalidCredential("unknown token version")
    signed, dot, signature = token.rpartition(".")
    if not dot or signed == VERSION:
        raise InvalidCredential("malformed token")
    try:
        presented = _b64decode(signature)
        payload = _b64decode(signed[len(_PREFIX) :])
    except (binascii.Error, ValueError):
        raise InvalidCredential("malformed token") from None
    if not any(hmac.compare_digest(presented, _sign(key, signed)) for key in keys):
        raise InvalidCredential("bad signature")
    try:
        data = orjson.loads(payload)
        claims = Claims(
            user_id=_text(data["sub"]),
            segment=Segment(data["seg"]),
            tier=_text(data["tier"]),
            api_key=_text(data["kid"]),
            issued_at=_seconds(data["iat"]),
            expires_at=_seconds(data["exp"]),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        # Signed by us yet unreadable: a key shared with something that is not an issuer.
        raise InvalidCredential("malformed claims") from None
    if claims.expires_at <= now_s:
        raise InvalidCredential("token expired")
    return claims


def _text(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("expected a non-empty string")
    return value


def _seconds(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError("expected integer seconds")
    return value


def parse_keys(text: str) -> tuple[bytes, ...]:
    """``PERSO_IDENTITY_KEYS``: comma-separated secrets, the first one signs."""
    keys = tuple(part.strip().encode("utf-8") for part in text.split(",") if part.strip())
    if not keys:
        raise ValueError("no identity key given")
    for key in keys:
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"every identity key must be at least {MIN_KEY_BYTES} characters")
    return keys
