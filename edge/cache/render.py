"""The personalize response body an edge sends, assembled from cached item JSON.

The items of a hit are the same bytes for every caller of an entry who asks for the same
count with no exclusions: ``RenderCache`` keeps them (and their ETag digest) per entry
generation, so a hit splices the per-request fields around bytes rendered once.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import orjson

from edge.cache.entry import CachedItem
from edge.cache.http_cache import items_digest


def render_items(items: Sequence[CachedItem], *, explain: bool) -> bytes:
    """The JSON array's members: ranks from 1 in the order given, explanations if asked."""
    return b",".join(item.json(rank, explain=explain) for rank, item in enumerate(items, 1))


def personalize_body(
    *,
    request_id: str,
    user_id: str,
    items: Sequence[CachedItem] | bytes,
    explain: bool,
    metadata: dict[str, Any],
) -> bytes:
    """The personalize response of the HTTP API contract; ``items`` may be already rendered
    (``render_items``)."""
    rendered = items if isinstance(items, bytes) else render_items(items, explain=explain)
    return b'{"request_id":%b,"user_id":%b,"items":[%b],"metadata":%b}' % (
        orjson.dumps(request_id),
        orjson.dumps(user_id),
        rendered,
        orjson.dumps(metadata),
    )


def new_request_id() -> str:
    """A random (version 4) UUID, a few times cheaper than ``str(uuid.uuid4())``."""
    h = bytearray(os.urandom(16))
    h[6] = (h[6] & 0x0F) | 0x40
    h[8] = (h[8] & 0x3F) | 0x80
    x = h.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


class RenderCache:
    """Rendered items and their ETag digest per (key, generation, count, explain)."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self._max = max_entries
        self._rendered: OrderedDict[tuple[str, int, int, bool], tuple[bytes, bytes]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._rendered)

    def get(
        self, key: str, generation: int, items: Sequence[CachedItem], *, explain: bool
    ) -> tuple[bytes, bytes]:
        """``(rendered items, items digest)`` of ``items``, the first ``len(items)`` of the
        entry of ``key`` at ``generation`` (generations are unique per fill)."""
        slot = (key, generation, len(items), explain)
        found = self._rendered.get(slot)
        if found is not None:
            return found
        made = (render_items(items, explain=explain), items_digest(i.item_id for i in items))
        self._rendered[slot] = made
        if len(self._rendered) > self._max:
            self._rendered.popitem(last=False)
        return made
