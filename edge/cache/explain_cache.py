"""The edge's cache of segment explanations (``POST /v1/explain`` for new and casual users).

An explanation the origin made from nothing of the user's but their segment is the same for
every user of that segment, so an edge keeps it under

    region | segment | item_id | explanation_style | page_type

for ``ttl_s`` (``PERSO_LLM_CACHE_TTL_S``, an hour: explanations change slowly), and past
that, until ``stale_until``, only to answer when the origin fails (stale-if-error).
Personal explanations (active and power users) are never put here. Bounded: an LRU of
``max_entries`` (an explanation is well under a kilobyte), in the edge process.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from enum import Enum

from protocol.api import ItemExplanation, PageType
from protocol.segments import Segment

DEFAULT_MAX_ENTRIES = 10_000


def explain_key(
    *, region: str, segment: Segment, item_id: str, style: str, page_type: PageType | None
) -> str:
    # "|" is outside the identifiers' alphabet (protocol.api.Identifier): no two different
    # requests can spell the same key.
    return "|".join((region, segment.value, item_id, style, page_type.value if page_type else ""))


class Usable(Enum):
    FRESH = "fresh"  # serve it
    STALE = "stale"  # past its TTL: only when the origin fails or the caller is over its limit


@dataclass(frozen=True, slots=True)
class CachedExplanation:
    item_id: str
    explanation: ItemExplanation
    filled_at: float
    expires_at: float
    stale_until: float


@dataclass
class ExplainCounters:
    """Explain answers by how they were served (``edge.http.metrics``)."""

    hits: int = 0
    misses: int = 0  # a segment explanation asked of the origin (and cached when it was one)
    stale: int = 0  # an expired one, because the origin failed or the caller was over the limit
    forwarded: int = 0  # a personal one: asked of the origin, never cached
    rate_limited: int = 0


class ExplainCache:
    def __init__(
        self, *, ttl_s: float, stale_s: float, max_entries: int = DEFAULT_MAX_ENTRIES
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.ttl_s = ttl_s
        self.stale_s = stale_s
        self._max_entries = max_entries
        self._entries: OrderedDict[str, CachedExplanation] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str, now: float) -> tuple[CachedExplanation, Usable] | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if now >= entry.stale_until:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry, Usable.FRESH if now < entry.expires_at else Usable.STALE

    def drop_item(self, item_id: str) -> int:
        """Forget every explanation of ``item_id`` (the catalog deleted it); how many."""
        keys = [key for key, entry in self._entries.items() if entry.item_id == item_id]
        for key in keys:
            del self._entries[key]
        return len(keys)

    def put(self, key: str, item_id: str, explanation: ItemExplanation, now: float) -> None:
        expires_at = now + self.ttl_s
        self._entries[key] = CachedExplanation(
            item_id, explanation, now, expires_at, expires_at + self.stale_s
        )
        self._entries.move_to_end(key)
        if len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
