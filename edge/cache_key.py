"""Algorithm 5 (seed 001): the key under which an edge shares a personalized answer.

    key = sha256(page_type : segment : geo_bucket : device : time_bucket : recent_hash
                 [: variant])

``time_bucket`` is the edge's clock floored to 15 minutes (not the client's timestamp,
which anyone could set to split the cache). ``recent_hash`` is the first 8 hex digits of
the sha256 of the user id and the user's last 5 interacted item ids, sorted; only power and
active users have one. The seed hashes the items alone, which would let two users who
clicked the same five items share one entry, ranked from the first one's whole embedding;
with the user in the hash such an entry is that user's alone. ``variant`` digests the
request's filters and ranking options, present only when the request has any, because
they change the answer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from protocol.api import PersonalizeRequest
from protocol.segments import Segment, is_fine_grained

TIME_BUCKET_S = 900
RECENT_ITEMS = 5


def time_bucket(now_s: float) -> int:
    return int(now_s // TIME_BUCKET_S) * TIME_BUCKET_S


def recent_hash(user_id: str, item_ids: Sequence[str]) -> str:
    """Hash of a user's last ``RECENT_ITEMS`` interactions, independent of their order."""
    recent = sorted(item_ids[-RECENT_ITEMS:])
    if not recent:
        return ""
    material = user_id + "\x1f" + ",".join(recent)
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:8]


def variant(request: PersonalizeRequest) -> str:
    """Digest of what in a request changes the ranked list besides the key's context."""
    constraints, options = request.constraints, request.options
    price = constraints.price_range
    parts = [
        ",".join(sorted(constraints.categories)) if constraints.categories else "",
        "" if price is None or price.min is None else repr(price.min),
        "" if price is None or price.max is None else repr(price.max),
        "" if options.exploration_rate is None else repr(options.exploration_rate),
        "" if options.diversity_weight is None else repr(options.diversity_weight),
    ]
    if not any(parts):
        return ""
    return hashlib.sha256("|".join(parts).encode("utf-8")).hexdigest()[:12]


def cache_key(
    *,
    user_id: str,
    page_type: str,
    segment: Segment,
    geo: str,
    device: str,
    now_s: float,
    recent_items: Sequence[str],
    variant_digest: str = "",
) -> str:
    recent = recent_hash(user_id, recent_items) if is_fine_grained(segment) else ""
    parts = [page_type, segment.value, geo, device, str(time_bucket(now_s)), recent]
    if variant_digest:
        parts.append(variant_digest)
    return hashlib.sha256(":".join(parts).encode("utf-8")).hexdigest()
