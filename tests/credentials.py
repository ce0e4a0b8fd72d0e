"""Credentials of the test deployments: one identity key, one API key per tier."""

from __future__ import annotations

from protocol.identity import Claims, issue
from protocol.segments import Segment

IDENTITY_KEY = "test-identity-key-0123456789abcdef"
API_SECRETS = {
    "premium": "premium-secret-0123456789",
    "standard": "standard-secret-0123456789",
    "free": "free-secret-0123456789abcd",
}
API_KEYS = ",".join(f"{tier}-shop:{tier}:{secret}" for tier, secret in API_SECRETS.items())


def user_token(
    user_id: str,
    *,
    now_s: float,
    segment: Segment = Segment.NEW,
    tier: str = "premium",
    ttl_s: int = 3600,
    key: str = IDENTITY_KEY,
) -> str:
    """A token as the origin's ``/v1/auth/token`` would issue it."""
    claims = Claims(user_id, segment, tier, f"{tier}-shop", int(now_s), int(now_s) + ttl_s)
    return issue(claims, key.encode())


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}
