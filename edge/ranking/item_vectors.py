"""The catalog's item vectors at an edge, for edge retrieval: what it retrieves each known
user's own candidates from (``edge.ranking.own_candidates``), the items nearest their model.

Held as int8 codes with a scale a row in inverted-file lists (``relevance.quantized_lists``:
132 bytes an item at dimension 128, 15 MB for 100K items; a query at 100K about 0.3 ms).
Kept as the catalog is:

- **at start**, and after a gap in the sync stream or a whole-catalog change, the catalog is
  read page by page from the origin (``protocol.item_vectors``, ``load``) and the lists are
  built anew (k-means, in a worker thread: 0.6 s at 100K); a read whose catalog version
  moved between pages starts over (rows may have shifted), at most ``MAX_RESTARTS`` times;
- **on ingest, change and delete**, the sync stream says which items changed
  (``sync.messages.ItemsChanged``): their vectors are fetched and replace the rows held, and
  the ids the origin no longer holds are dropped (also as soon as an ``ItemUpdate`` says an
  item was removed, ``drop``). An answer from an origin whose catalog is older than the
  change (a replica that has not reloaded yet) is asked again after ``RETRY_S``.

Until the first load completes (or while the origin cannot be read) ``nearest`` answers
nothing, and the edge ranks from its pools alone. Changes run one at a time, in the order
they came, in one background task (``run``); each swaps in a new ``QuantizedLists``, so a
query never sees half a change.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from edge.exceptions import OriginRejected, OriginUnavailable
from protocol.exceptions import MalformedMessage
from protocol.item_vectors import (
    MAX_PAGE,
    ItemVectors,
    ItemVectorsOf,
    ItemVectorsPage,
    ItemVectorsRequest,
)
from relevance.quantized_lists import QuantizedLists

log = logging.getLogger(__name__)

# A read of the whole catalog starts over at most this often when the catalog moves under it.
MAX_RESTARTS = 3
# Wait before asking again after a failed read, or an answer older than the change.
RETRY_S = 1.0
# Times a change is asked for again while the origin's catalog is older than it.
MAX_STALE_RETRIES = 10

Fetch = Callable[[ItemVectorsRequest], Awaitable[ItemVectors]]


@dataclass
class VectorCounters:
    loads: int = 0  # whole-catalog reads completed
    changes: int = 0  # changed items applied (replaced, added or dropped)
    failures: int = 0  # reads that failed (retried)


class ItemVectorTable:
    def __init__(
        self, fetch: Fetch, dim: int, *, sleep: Callable[[float], Awaitable[None]]
    ) -> None:
        self._fetch = fetch
        self._dim = dim
        self._sleep = sleep
        self._lists: QuantizedLists | None = None
        self._ids: list[str] = []  # each row number's item id
        self._number: dict[str, int] = {}  # each held item's row number
        self._pending: asyncio.Queue[tuple[int, tuple[str, ...] | None]] = asyncio.Queue()
        self.version = -1  # the catalog's version held (-1: nothing loaded)
        self.counters = VectorCounters()

    def __len__(self) -> int:
        return len(self._number)

    @property
    def loaded(self) -> bool:
        return self._lists is not None

    @property
    def nbytes(self) -> int:
        """The lists' arrays (the ids' strings and their table besides)."""
        return 0 if self._lists is None else self._lists.nbytes

    def nearest(self, vector: npt.NDArray[np.floating], k: int) -> list[str]:
        """The ids of up to ``k`` held items of highest dot product with ``vector``, best
        first (none before the catalog is loaded)."""
        lists = self._lists
        if lists is None or k <= 0:
            return []
        numbers, _ = lists.nearest(np.asarray(vector, np.float32), k)
        ids = self._ids
        return [ids[n] for n in numbers.tolist()]

    def changed(self, version: int, item_ids: Iterable[str] | None) -> None:
        """The catalog changed ``item_ids`` (None: everything) and is at ``version``:
        fetched by ``run``, in turn."""
        self._pending.put_nowait((version, None if item_ids is None else tuple(item_ids)))

    def reload(self) -> None:
        """Read the whole catalog again (a gap in the sync stream: changes may be lost)."""
        self.changed(-1, None)

    def drop(self, item_ids: Iterable[str]) -> None:
        """The catalog deleted ``item_ids``: out of the lists at once."""
        gone = [self._number.pop(i) for i in item_ids if i in self._number]
        if gone and self._lists is not None:
            none = np.empty(0, np.int32)
            self._lists = self._lists.with_rows(
                none,
                np.empty((0, self._dim), np.int8),
                np.empty(0, np.float32),
                dropped=np.array(gone, np.int32),
            )
            self.counters.changes += len(gone)

    async def run(self, stop: asyncio.Event) -> None:
        """Load the catalog, then apply the changes the sync stream announces, until
        ``stop``."""
        self.reload()
        while not stop.is_set():
            version, item_ids = await self._pending.get()
            try:
                if item_ids is None:
                    await self._load(stop)
                else:
                    await self._apply(version, item_ids, stop)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("item vectors: a change was not applied")
            finally:
                self._pending.task_done()

    async def settled(self) -> None:
        """Wait until every change announced so far is applied (or given up)."""
        await self._pending.join()

    async def _load(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                pages = await self._pages()
            except (OriginUnavailable, OriginRejected, MalformedMessage) as exc:
                self.counters.failures += 1
                log.info("item vectors not read, asked again in %.0f s: %s", RETRY_S, exc)
                await self._sleep(RETRY_S)
                continue
            ids = [i for page in pages for i in page.item_ids]
            if not ids:
                self._lists, self._ids, self._number = None, [], {}
                self.version = pages[0].version if pages else self.version
                self.counters.loads += 1
                return
            codes = np.concatenate([p.codes for p in pages])
            scales = np.concatenate([p.scales for p in pages])
            numbers = np.arange(len(ids), dtype=np.int32)
            lists = await asyncio.to_thread(QuantizedLists.build, numbers, codes, scales)
            self._lists, self._ids = lists, ids
            self._number = {item_id: n for n, item_id in enumerate(ids)}
            self.version = pages[-1].version
            self.counters.loads += 1
            log.info("item vectors: %d items of catalog version %d", len(ids), self.version)
            return

    async def _pages(self) -> list[ItemVectors]:
        """The whole catalog, page by page, from one catalog version."""
        for _ in range(MAX_RESTARTS + 1):
            pages: list[ItemVectors] = []
            offset = 0
            while True:
                page = await self._fetch(ItemVectorsPage(offset=offset, limit=MAX_PAGE))
                self._check(page)
                if pages and page.version != pages[0].version:
                    break  # the catalog moved: rows may have shifted, read it again
                pages.append(page)
                offset += len(page)
                if not len(page) or offset >= page.total:
                    return pages
        return pages  # still moving: what was read; the changes since will come

    async def _apply(self, version: int, item_ids: tuple[str, ...], stop: asyncio.Event) -> None:
        for attempt in range(MAX_STALE_RETRIES + 1):
            if stop.is_set():
                return
            answers = []
            try:
                for start in range(0, len(item_ids), MAX_PAGE):
                    batch = list(item_ids[start : start + MAX_PAGE])
                    answers.append(await self._fetch(ItemVectorsOf(item_ids=batch)))
                for answer in answers:
                    self._check(answer)
            except (OriginUnavailable, OriginRejected, MalformedMessage) as exc:
                self.counters.failures += 1
                log.info("changed item vectors not read (%d): %s", attempt, exc)
                await self._sleep(RETRY_S)
                continue
            if any(a.version < version for a in answers) and attempt < MAX_STALE_RETRIES:
                await self._sleep(RETRY_S)  # an origin that has not caught up yet
                continue
            for answer in answers:
                self._put(answer)
            return
        log.warning("item vectors: %d changed items not read; kept as they were", len(item_ids))

    def _put(self, answer: ItemVectors) -> None:
        self.drop(answer.absent)
        if not len(answer):
            return
        if self._lists is None:
            self.reload()  # nothing to add rows to yet: build from the whole catalog
            return
        numbers = []
        for item_id in answer.item_ids:
            number = self._number.get(item_id)
            if number is None:
                number = self._number[item_id] = len(self._ids)
                self._ids.append(item_id)
            numbers.append(number)
        self._lists = self._lists.with_rows(
            np.array(numbers, np.int32), answer.codes, answer.scales
        )
        self.version = max(self.version, answer.version)
        self.counters.changes += len(answer)

    def _check(self, answer: ItemVectors) -> None:
        if len(answer) and answer.dim != self._dim:
            raise MalformedMessage(
                f"item vectors of dimension {answer.dim}, the edge's is {self._dim}"
            )
