"""Where an edge keeps its entries: one interface, double-buffered entries, two stores.

Double buffering: a refresh writes the standby buffer of its key and then flips
the key's active pointer, so a reader sees the old entry or the new one, never part of
one. A bulk swap (``swap_all``) builds a whole new table off the hot path and replaces the
old table in one flip. Double buffering as designed swaps the table on a new model epoch;
the edge does not
(``edge.sync_apply``): an epoch is a soft purge, every entry filled before it stale from
then on, so that the old model's answers still stand in when the origin fails, which an
emptied table could not give. ``swap_all`` is kept for an operator's bulk load (a PoP's
warm-up from a snapshot), which nothing in the product does yet.

Entries carry a ``generation`` taken when their fill STARTED (``next_generation``): a put
flips only if its generation is greater than the active entry's, so a slow fill that
started earlier cannot overwrite a newer one that finished first. After ``swap_all`` or
``clear``, fills that started before it are refused too (the table's floor), so an answer
of the old model or a flushed state does not come back through a late fill.
``delete`` and ``delete_tag`` set no such floor: a fill already in flight when its key is
purged stores its answer after the purge.

Generations come from each store's ``next_generation()``: the wall clock in microseconds,
strictly increasing within the store. They are comparable between the edge processes that
share one PoP-local Redis because those share a clock (up to its skew), which a counter in
one process could not give; the call is synchronous, so a fill pays no round trip for it.

Every entry is stored for an audience (``protocol.audience``): a store keeps an entry only
under a key made for the entry's own audience (``admit``), and raises ``AudienceMismatch``
otherwise, so that a user's personal answer can never be written where a key without that
user finds it, whatever the caller believed. Keys are ``edge.cache.key.CacheKey``s;
``delete`` takes a key's digest, which is what purges name.

``MemoryEntryStore`` is the in-process store (TTL + LRU under a byte budget);
``edge.cache.redis_store.RedisEntryStore`` is shared by the edge processes of a PoP.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from edge.cache.entry import Entry
from edge.cache.key import CacheKey
from edge.exceptions import AudienceMismatch

# swap_all yields to the event loop after building this many slots, so that requests keep
# being answered (from the old table) while a big new table is built.
SWAP_BATCH = 512


def admit(key: CacheKey, entry: Entry) -> None:
    """Refuse ``entry`` under ``key`` unless both are for the same audience."""
    if entry.audience != key.audience:
        raise AudienceMismatch(
            f"an entry for {entry.audience!r} cannot be stored under a key for {key.audience!r}"
        )


class EntryStore(Protocol):
    """The edge's cache of answers, by cache key."""

    def next_generation(self) -> int:
        """A generation for a fill starting now: greater than any this store gave before."""
        ...

    async def get(self, key: CacheKey) -> Entry | None:
        """The active entry of ``key``, also past its ``expires_at`` (the caller tells fresh
        from stale by its times); None when there is none or it is past ``stale_until``."""
        ...

    async def put(self, key: CacheKey, entry: Entry) -> bool:
        """Write ``entry`` to the standby buffer and flip to it, only if its generation is
        greater than the active entry's (and than the table's floor); whether it flipped.
        ``AudienceMismatch`` when ``entry`` is not for ``key``'s audience."""
        ...

    async def swap_all(self, entries: Mapping[CacheKey, Entry]) -> None:
        """Replace every entry by ``entries`` in one flip: readers see all old or all new. A
        swap that started before another one already flipped is dropped.
        ``AudienceMismatch`` (and nothing swapped) when an entry is not for its key."""
        ...

    async def delete(self, digest: str) -> bool:
        """Remove the key of ``digest``; whether it had a servable entry."""
        ...

    async def delete_tag(self, tag: str) -> int:
        """Remove every entry tagged ``tag``; how many servable entries went."""
        ...

    async def clear(self) -> None:
        """Remove every entry (one flip to an empty table)."""
        ...

    async def size(self) -> int:
        """How many servable entries there are."""
        ...

    async def ping(self) -> bool:
        """Whether the store answers now (for ``/dependencies``, never on a request path)."""
        ...


class Generations:
    """Strictly increasing integers from the wall clock in microseconds."""

    def __init__(self, clock_us: Callable[[], int] | None = None) -> None:
        self._clock_us = clock_us or _wall_clock_us
        self._last = 0

    def __call__(self) -> int:
        # Past the clock when called faster than it ticks, or when it stepped back.
        self._last = max(self._last + 1, self._clock_us())
        return self._last


def _wall_clock_us() -> int:
    return time.time_ns() // 1000


class _Slot:
    """One key: buffers A and B, the active one named by ``on_b``.

    A flip releases the buffer it leaves: a reader that got that entry holds its own
    reference, and keeping it in the slot would double what the budget must charge.
    """

    __slots__ = ("a", "b", "charged", "on_b")

    def __init__(self) -> None:
        self.a: Entry | None = None
        self.b: Entry | None = None
        self.on_b = False
        self.charged = 0

    @property
    def active(self) -> Entry | None:
        return self.b if self.on_b else self.a

    def flip_to(self, entry: Entry) -> Entry | None:
        """Fill the standby buffer with ``entry``, make it active; the previous entry."""
        if self.on_b:
            self.a = entry
            previous, self.b, self.on_b = self.b, None, False
        else:
            self.b = entry
            previous, self.a, self.on_b = self.a, None, True
        return previous


class _Table:
    """One epoch's entries in LRU order, their tag index and byte count: everything a swap
    replaces, so that replacing it is one assignment."""

    __slots__ = ("bytes", "epoch", "floor", "slots", "tags")

    def __init__(self, *, epoch: int, floor: float) -> None:
        self.slots: OrderedDict[str, _Slot] = OrderedDict()
        self.tags: dict[str, set[str]] = {}
        self.bytes = 0
        self.epoch = epoch
        # Puts of a generation up to this are refused: their fills started before the flip.
        self.floor = floor

    def write(self, key: str, entry: Entry) -> None:
        slot = self.slots.get(key)
        if slot is None:
            slot = self.slots[key] = _Slot()
        else:
            self.slots.move_to_end(key)
        previous = slot.flip_to(entry)
        if previous is not None:
            self.bytes -= slot.charged
            self._untag(key, previous.tags)
        slot.charged = entry.size
        self.bytes += slot.charged
        for tag in entry.tags:
            self.tags.setdefault(tag, set()).add(key)

    def remove(self, key: str) -> Entry | None:
        slot = self.slots.pop(key, None)
        if slot is None:
            return None
        entry = slot.active
        self.bytes -= slot.charged
        if entry is not None:
            self._untag(key, entry.tags)
        return entry

    def evict(self, now: float, max_bytes: int) -> None:
        """From the least recently used end: entries past stale_until, then whatever exceeds
        the budget. Keys change every 15 minutes, so without this an edge would keep every
        entry it ever filled."""
        while self.slots:
            key, slot = next(iter(self.slots.items()))
            entry = slot.active
            if entry is not None and entry.stale_until > now and self.bytes <= max_bytes:
                return
            self.remove(key)

    def _untag(self, key: str, tags: Iterable[str]) -> None:
        for tag in tags:
            keys = self.tags.get(tag)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self.tags[tag]


class MemoryEntryStore:
    """The in-process store: TTL + LRU under a byte budget, one edge process.

    Single event loop, no threads: a method runs without an await between its check and its
    change, so two puts of one key cannot both pass the generation check.
    """

    def __init__(
        self,
        *,
        max_bytes: int,
        clock: Callable[[], float],
        generations: Callable[[], int] | None = None,
    ) -> None:
        self._max_bytes = max_bytes
        self._clock = clock
        self._generations = generations or Generations()
        self._epochs = itertools.count(1)
        self._table = _Table(epoch=0, floor=-math.inf)

    def __repr__(self) -> str:
        return f"MemoryEntryStore(max_bytes={self._max_bytes})"

    @property
    def bytes(self) -> int:
        """What the entries are charged against the budget."""
        return self._table.bytes

    def next_generation(self) -> int:
        return self._generations()

    async def get(self, key: CacheKey) -> Entry | None:
        # The hit path: a dict lookup, the clock, an LRU touch; no copy.
        table = self._table
        slot = table.slots.get(key.digest)
        if slot is None:
            return None
        entry = slot.b if slot.on_b else slot.a
        if entry is None or entry.stale_until <= self._clock():
            table.remove(key.digest)
            return None
        table.slots.move_to_end(key.digest)
        return entry

    async def put(self, key: CacheKey, entry: Entry) -> bool:
        admit(key, entry)
        table = self._table
        if entry.generation <= table.floor:
            return False
        now = self._clock()
        slot = table.slots.get(key.digest)
        active = slot.active if slot is not None else None
        if (
            active is not None
            and active.stale_until > now
            and entry.generation <= active.generation
        ):
            return False
        table.write(key.digest, entry)
        table.evict(now, self._max_bytes)
        return True

    async def swap_all(self, entries: Mapping[CacheKey, Entry]) -> None:
        for key, entry in entries.items():
            admit(key, entry)
        epoch = next(self._epochs)
        table = _Table(epoch=epoch, floor=-math.inf)
        now = self._clock()
        for n, (key, entry) in enumerate(entries.items(), start=1):
            if entry.stale_until > now:  # a dead one would take budget from live ones
                table.write(key.digest, entry)
            if n % SWAP_BATCH == 0:
                table.evict(self._clock(), self._max_bytes)
                await asyncio.sleep(0)  # readers go on with the old table meanwhile
        table.evict(self._clock(), self._max_bytes)
        if self._table.epoch > epoch:
            return  # a swap or clear that started later has flipped already
        table.floor = self.next_generation()
        self._table = table

    async def delete(self, digest: str) -> bool:
        entry = self._table.remove(digest)
        return entry is not None and entry.stale_until > self._clock()

    async def delete_tag(self, tag: str) -> int:
        table = self._table
        now = self._clock()
        deleted = 0
        for key in list(table.tags.get(tag, ())):
            entry = table.remove(key)
            if entry is not None and entry.stale_until > now:
                deleted += 1
        return deleted

    async def clear(self) -> None:
        self._table = _Table(epoch=next(self._epochs), floor=self.next_generation())

    async def ping(self) -> bool:
        return True  # in this process: it answers whenever the process does

    async def size(self) -> int:
        now = self._clock()
        return sum(
            1
            for slot in self._table.slots.values()
            if (entry := slot.active) is not None and entry.stale_until > now
        )
