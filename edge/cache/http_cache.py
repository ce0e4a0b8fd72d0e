"""The HTTP manners of a CDN on the edge's answers: validators and cache headers.

- ``ETag``: a weak validator (``W/"..."``): two answers with the same ETag carry the same
  items in the same order for the same user, model and explanation choice; they still
  differ in ``request_id`` and ``latency_ms``, hence weak (RFC 9110, 8.8.1).
- ``If-None-Match`` with a matching tag (weak comparison, or ``*``) on the personalize POST
  gets 412 (RFC 9110, 13.1.2: 304 is for GET and HEAD alone) and the validators.
- ``Cache-Control: private, max-age=N``: the answer is the caller's own (never for a
  shared cache) and stays good for the entry's remaining freshness; degraded answers
  (stale, popular) are ``no-store`` so nobody keeps them.
- ``Vary: Authorization``: the answer depends on who asks.
- ``Age``: seconds since the origin produced the entry (RFC 9111, 5.1).
- ``X-Cache``: ``HIT``, ``MISS`` or ``STALE``, as Varnish and Fastly report it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

HIT = "HIT"
MISS = "MISS"
STALE = "STALE"


def items_digest(item_ids: Iterable[str]) -> bytes:
    """What the ETag needs of the shown items: their ids in order (cacheable per entry)."""
    digest = hashlib.blake2b(digest_size=16)
    for item_id in item_ids:
        digest.update(item_id.encode() + b"\x1e")
    return digest.digest()


def etag(*, user_id: str, model_version: str, items: bytes, explain: bool) -> str:
    """``items`` is ``items_digest`` of the shown items."""
    digest = hashlib.blake2b(items, digest_size=12)
    digest.update(b"\x1f1" if explain else b"\x1f0")
    digest.update(model_version.encode() + b"\x1f" + user_id.encode())
    return f'W/"{digest.hexdigest()}"'


def _opaque(tag: str) -> str:
    tag = tag.strip()
    return tag[2:] if tag.startswith("W/") else tag


def not_modified(if_none_match: str | None, current: str) -> bool:
    """Whether ``If-None-Match`` names ``current`` (weak comparison: ``W/`` is ignored)."""
    if not if_none_match:
        return False
    wanted = _opaque(current)
    for listed in if_none_match.split(","):
        tag = listed.strip()
        if tag == "*" or _opaque(tag) == wanted:
            return True
    return False


def cache_control(*, fresh_for_s: float, degraded: bool) -> str:
    if degraded:
        return "no-store"
    return f"private, max-age={max(0, int(fresh_for_s))}"


def age(now: float, filled_at: float) -> str:
    return str(max(0, int(now - filled_at)))
