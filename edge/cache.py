"""The edge's in-process cache of shared answers: a TTL + LRU map of ``Entry``.

An entry holds a ranked list for a cache key, stripped of everything that belongs to one
request (``request_id``, ``user_id``, the caller's exclusions and count), which are applied
when serving it. It is replaced whole, never edited, so a reader never sees a half-built one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Literal, overload

from protocol.api import RankedItem


@dataclass(frozen=True, slots=True)
class Entry:
    items: tuple[RankedItem, ...]
    # True when the origin had no more items to give: serving fewer than asked is then
    # the right answer, not a reason to refetch.
    complete: bool
    model_version: str
    exploration_applied: bool
    stored_at: float
    expires_at: float
    # The origin could not personalize (a dependency failed): served once, never stored.
    degraded: bool = False

    @overload
    def select(
        self, count: int, exclude: Collection[str], *, partial: Literal[True]
    ) -> list[RankedItem]: ...

    @overload
    def select(
        self, count: int, exclude: Collection[str], *, partial: bool = False
    ) -> list[RankedItem] | None: ...

    def select(
        self, count: int, exclude: Collection[str], *, partial: bool = False
    ) -> list[RankedItem] | None:
        """The first ``count`` items not excluded, re-ranked from 1. When fewer remain and
        the origin may have more, None (ask it) unless ``partial`` (serve what there is)."""
        chosen = []
        for item in self.items:
            if item.item_id in exclude:
                continue
            chosen.append(item)
            if len(chosen) == count:
                break
        if len(chosen) < count and not self.complete and not partial:
            return None
        return [
            item if item.rank == rank else item.model_copy(update={"rank": rank})
            for rank, item in enumerate(chosen, start=1)
        ]


class EdgeCache:
    def __init__(self, *, max_entries: int, clock: Callable[[], float]) -> None:
        self._max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> Entry | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires_at <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry

    def put(self, key: str, entry: Entry) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
