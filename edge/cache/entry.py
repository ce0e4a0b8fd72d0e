"""What an edge caches: entries of shared answers, their items kept as they will be sent.

Where entries are kept (in process under a byte budget, or in a PoP-local Redis) is
``edge.cache.store``'s concern; this module is what they are. An entry holds a ranked list
for a cache key, stripped of everything that belongs to one request (``request_id``,
``user_id``, the caller's exclusions and count), which are applied when serving it. Its
``audience`` (``protocol.audience``) says whose answer it is: a segment's, which any of
its users may be served, or one user's, which only they may; a store keeps an entry only
under a key made for the same audience. Items
are kept as the JSON they will be sent as (about 0.5 KB each rather than some 2 KB as
objects), so a budget in bytes bounds the edge's memory (``Entry.size`` is what a store
charges) and a hit costs no serialisation of items. An entry is replaced whole, never
edited, so a reader never sees a half-built one.

An entry's times are absolute (the edge's wall clock, seconds): ``filled_at`` when the
origin's answer was stored (the Age header), ``expires_at`` the end of freshness,
``stale_until`` the end of the window in which it may still be served when the origin
fails (stale-if-error). Its ``generation`` is taken when its fill STARTED
(``EntryStore.next_generation``), so a store can refuse a slow, older fill that finishes
after a newer one. ``tags`` are the surrogate keys (item ids...) it can be purged by.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal, overload

import orjson

from edge.cache.prepared_pool import PreparedPool
from protocol.api import RankedItem
from protocol.audience import Audience, Personal, Shared
from protocol.pools import Pool

# Python object overhead per cached item and per entry, beyond their bytes (measured with
# tracemalloc, rounded up): what the budget charges besides the JSON itself.
ITEM_OVERHEAD = 200
ENTRY_OVERHEAD = 400
# Per surrogate tag: the str object and its slot in the tuple.
TAG_OVERHEAD = 64


@dataclass(frozen=True, slots=True)
class CachedItem:
    item_id: str
    # The item's JSON members except rank and explanation: b'"item_id":"it-1","score":...'
    members: bytes
    # JSON of its explanation, b"null" when it has none.
    explanation: bytes

    @classmethod
    def of(cls, item: RankedItem) -> CachedItem:
        # orjson's output keeps the 4 KB buffer it was written into; a copy of the exact
        # length (a slice, or tobytes) keeps what the cache holds down to what it needs.
        members = orjson.dumps(item.model_dump(exclude={"rank", "explanation"}))[1:-1]
        explanation = b"null"
        if item.explanation is not None:
            explanation = memoryview(orjson.dumps(item.explanation.model_dump())).tobytes()
        return cls(item.item_id, members, explanation)

    def json(self, rank: int, *, explain: bool) -> bytes:
        explanation = self.explanation if explain else b"null"
        return b'{"rank":%d,%b,"explanation":%b}' % (rank, self.members, explanation)

    @property
    def size(self) -> int:
        return len(self.members) + len(self.explanation) + len(self.item_id) + ITEM_OVERHEAD


@dataclass(frozen=True, slots=True)
class Entry:
    items: tuple[CachedItem, ...]
    # Who may be served this answer: set from what the origin says it was built from.
    audience: Audience = field(kw_only=True)
    # True when the origin had no more items to give: serving fewer than asked is then
    # the right answer, not a reason to refetch.
    complete: bool
    model_version: str
    exploration_applied: bool
    expires_at: float
    # The origin could not personalize (a dependency failed): served once, never stored.
    degraded: bool = False
    # 0.0: not recorded (a filler that predates the field); no Age can be told then.
    filled_at: float = field(default=0.0, kw_only=True)
    # Defaults to expires_at (no stale-if-error window); never earlier than it.
    stale_until: float = field(default=math.nan, kw_only=True)
    generation: int = field(default=0, kw_only=True)
    tags: tuple[str, ...] = field(default=(), kw_only=True)
    # What the decision log needs of each served answer (``protocol.decisions``): the
    # items' scores and propensities (aligned with ``items``), the context cell and the
    # policy (``<name>/<version>``) that ranked them.
    scores: tuple[float, ...] = field(default=(), kw_only=True)
    propensities: tuple[float, ...] = field(default=(), kw_only=True)
    context: str = field(default="", kw_only=True)
    policy: str = field(default="", kw_only=True)
    # A segment's candidates with what an edge ranks them by, for its users it ranks
    # itself (``edge.serve.pool_answer``); only on a shared entry: it holds nobody's data.
    pool: Pool | None = field(default=None, kw_only=True)
    # The request id of the origin's answer this entry holds: every decision served from
    # it names that ranking (``protocol.decisions``' ranking_id), whose context the origin
    # may have logged (``protocol.contexts``).
    ranking_id: str = field(default="", kw_only=True)
    # The pool as ranking reads it, prepared once here (when a fill or a store's decoding
    # builds the entry), not on every request ranked from it.
    prepared_pool: PreparedPool | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.pool is not None:
            if not isinstance(self.audience, Shared):
                raise ValueError("a pool is a segment's: never on an entry for one user")
            object.__setattr__(self, "prepared_pool", PreparedPool.of(self.pool))
        if math.isnan(self.stale_until):
            object.__setattr__(self, "stale_until", self.expires_at)
        elif self.stale_until < self.expires_at:
            # A store drops an entry at stale_until: it would vanish while still fresh.
            raise ValueError(
                f"stale_until {self.stale_until} is before expires_at {self.expires_at}"
            )

    @property
    def size(self) -> int:
        return (
            sum(item.size for item in self.items)
            + len(self.model_version)
            + sum(len(tag) + TAG_OVERHEAD for tag in self.tags)
            + (len(self.audience.user_id) if isinstance(self.audience, Personal) else 0)
            + 16 * len(self.scores)
            + len(self.context)
            + len(self.policy)
            + len(self.ranking_id)
            + (self.pool.size if self.pool is not None else 0)
            + (self.prepared_pool.extra_size if self.prepared_pool is not None else 0)
            + ENTRY_OVERHEAD
        )

    @overload
    def select(
        self, count: int, exclude: Collection[str], *, partial: Literal[True]
    ) -> list[CachedItem]: ...

    @overload
    def select(
        self, count: int, exclude: Collection[str], *, partial: bool = False
    ) -> list[CachedItem] | None: ...

    def select(
        self, count: int, exclude: Collection[str], *, partial: bool = False
    ) -> list[CachedItem] | None:
        """The first ``count`` items not excluded, in rank order. When fewer remain and the
        origin may have more, None (ask it) unless ``partial`` (serve what there is)."""
        chosen = []
        for item in self.items:
            if item.item_id in exclude:
                continue
            chosen.append(item)
            if len(chosen) == count:
                break
        if len(chosen) < count and not self.complete and not partial:
            return None
        return chosen
