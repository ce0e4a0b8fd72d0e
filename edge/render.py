"""The personalize response body an edge sends, assembled from cached item JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from edge.cache import CachedItem


def personalize_body(
    *,
    request_id: str,
    user_id: str,
    items: Sequence[CachedItem],
    explain: bool,
    metadata: dict[str, Any],
) -> bytes:
    """Seed 001's response: ranks from 1 in the order given, explanations only if asked."""
    rendered = b",".join(item.json(rank, explain=explain) for rank, item in enumerate(items, 1))
    return b'{"request_id":%b,"user_id":%b,"items":[%b],"metadata":%b}' % (
        orjson.dumps(request_id),
        orjson.dumps(user_id),
        rendered,
        orjson.dumps(metadata),
    )
