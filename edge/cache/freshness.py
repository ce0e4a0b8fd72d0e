"""How an edge may use a cached entry at a given moment (RFC 5861's two extensions).

    filled_at ........ refresh_at ........ expires_at ................ stale_until
    |      FRESH       |  REVALIDATE        |      STALE (only if the origin fails)  |  GONE

- FRESH: serve it.
- REVALIDATE (stale-while-revalidate, ahead of expiry): serve it and refresh it in the
  background, so a busy key never expires under its readers.
- STALE: do not serve it while the origin can answer; when the origin times out, errors
  or is down, serve it, marked degraded (stale-if-error).
- GONE: the store drops it.

The refresh window is the last ``REFRESH_FRACTION`` of the entry's lifetime, at least
``MIN_REFRESH_S``. Entries that live less than ``MIN_LIFETIME_FOR_REFRESH_S`` have none:
they are short on purpose (the settle window of ``invalidation.ttl``: the next fill must
wait for the user's embedding to catch up), and refreshing them early would defeat that.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from enum import Enum

from edge.cache.entry import Entry

REFRESH_FRACTION = 0.1
MIN_REFRESH_S = 1.0
MIN_LIFETIME_FOR_REFRESH_S = 10.0


class Freshness(Enum):
    FRESH = "fresh"
    REVALIDATE = "revalidate"
    STALE = "stale"
    GONE = "gone"


def refresh_at(filled_at: float, expires_at: float) -> float:
    """When a background refresh of the entry should start."""
    lifetime = expires_at - filled_at
    if lifetime < MIN_LIFETIME_FOR_REFRESH_S:
        return expires_at
    return expires_at - max(MIN_REFRESH_S, lifetime * REFRESH_FRACTION)


def freshness(now: float, *, filled_at: float, expires_at: float, stale_until: float) -> Freshness:
    if now < refresh_at(filled_at, expires_at):
        return Freshness.FRESH
    if now < expires_at:
        return Freshness.REVALIDATE
    if now < stale_until:
        return Freshness.STALE
    return Freshness.GONE


def refresh_due(state: Freshness, *, expires_at: float, key_ends_at: float) -> bool:
    """Whether a hit should start a background refresh: in the refresh window, and only if
    the key outlives the entry (a key that changes first, with its time bucket, would never
    be read again after the refresh)."""
    return state is Freshness.REVALIDATE and expires_at < key_ends_at


# Tag-level soft purges remembered at most; beyond, the oldest folds into a purge of all.
MAX_SOFT_TAGS = 10_000


@dataclass
class Staleness:
    """Soft purges: everything filled before ``all_before``; tagged entries filled before
    their tag's moment."""

    all_before: float = 0.0
    tags: OrderedDict[str, float] = field(default_factory=OrderedDict)

    def purge_all(self, now: float) -> None:
        self.all_before = now
        self.tags.clear()  # older than the moment that now covers everything

    def purge_tag(self, tag: str, now: float) -> None:
        self.tags[tag] = now
        self.tags.move_to_end(tag)
        if len(self.tags) > MAX_SOFT_TAGS:
            # The oldest moment folds into all_before: more entries go stale, none stays fresh
            _, oldest = self.tags.popitem(last=False)
            self.all_before = max(self.all_before, oldest)

    def is_stale(self, entry: Entry) -> bool:
        if entry.filled_at < self.all_before:
            return True
        if not self.tags:
            return False
        tags = self.tags
        return any(entry.filled_at < tags.get(tag, -1.0) for tag in entry.tags)
