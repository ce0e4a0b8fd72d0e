"""Items the catalog deleted, remembered for a while (``REMEMBER_S``).

A removal (``sync.messages.ItemUpdate`` with ``removed``) drops what the edge holds of the
item at once, but a fill or a popular-list refresh already on its way from the origin may
have been ranked before the delete: it is stored without the items remembered here. Five
minutes outlast any fill (bounded by the origin timeout) many times over; after that the
origin no longer serves the item. Bounded: at most ``max_items`` (the oldest go first).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

REMEMBER_S = 300.0
MAX_ITEMS = 100_000


class RemovedItems:
    def __init__(
        self,
        *,
        clock: Callable[[], float],
        remember_s: float = REMEMBER_S,
        max_items: int = MAX_ITEMS,
    ) -> None:
        self._clock = clock
        self._remember_s = remember_s
        self._max_items = max_items
        self._until: OrderedDict[str, float] = OrderedDict()  # item id -> forgotten at

    def __len__(self) -> int:
        self._expire(self._clock())
        return len(self._until)

    def add(self, item_id: str) -> None:
        now = self._clock()
        self._expire(now)
        self._until.pop(item_id, None)
        self._until[item_id] = now + self._remember_s
        while len(self._until) > self._max_items:
            self._until.popitem(last=False)

    def __contains__(self, item_id: object) -> bool:
        until = self._until.get(item_id) if isinstance(item_id, str) else None
        return until is not None and self._clock() < until

    def kept(self, item_ids: Iterable[str]) -> list[int]:
        """Positions of the ids not removed; all of them while nothing is remembered."""
        ids = list(item_ids)
        if not self._until:
            return list(range(len(ids)))
        return [n for n, item_id in enumerate(ids) if item_id not in self]

    def _expire(self, now: float) -> None:
        # Insertion order is expiry order: every item is remembered equally long.
        while self._until:
            item_id, until = next(iter(self._until.items()))
            if until > now:
                return
            del self._until[item_id]
