"""Cache keys for store tests: names as digests, all for one shared audience."""

from __future__ import annotations

from collections.abc import Mapping

from edge.cache.entry import Entry
from edge.cache.key import CacheKey
from protocol.audience import Shared

SHARED = Shared("casual")


def K(name: str) -> CacheKey:
    """The key named ``name`` (its digest), for ``SHARED``."""
    return CacheKey(name, SHARED)


def keyed(table: Mapping[str, Entry]) -> dict[CacheKey, Entry]:
    """``table`` with its names as keys (``K``), for ``swap_all``."""
    return {K(name): entry for name, entry in table.items()}
