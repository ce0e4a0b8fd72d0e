"""An origin keeping its in-memory catalog in step with the catalog other origins write.

The origins' stream (``origin.control``) tells of every catalog change; what to reload for
each is ``origin.catalog.replication.reload_for``'s rule. The reloads run here, beside the
stream rather than in its reader: a catalog origin that is down (or slow, streaming a whole
catalog) then holds up no model epoch behind the change, and a burst of changes (a catalog
file loaded in batches of 1,000) is fetched as one (``merged``).

Where a reload fetches from: the catalog origin's internal routes on a replica
(``ReplicaFetch``), the vector store otherwise (``StoreFetch``: a Qdrant server that
another origin wrote). A fetch and its swap run under ``Origin.catalog_writes``, taking
turns with this origin's own writes, so that no fetch read before a write of this process
is swapped in after it. A failed reload is kept pending and tried again after a back-off;
meanwhile the origin serves the index it has.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from origin.catalog.item_index import ItemIndex, load_index
from origin.catalog.items import Item
from origin.catalog.replica import CatalogOrigin, index_of
from origin.catalog.replication import NOTHING, CatalogMark, Reload, merged, read_mark
from origin.catalog.vector_store import VectorStore
from origin.runtime import Origin
from redis_client.client import RedisClient
from resilience.backoff import Backoff

log = logging.getLogger(__name__)

Matrix = npt.NDArray[np.float32]
# A failed reload is tried again after 0.2 s, doubling to 5 s.
RETRY_BASE_S = 0.2
RETRY_CAP_S = 5.0


class CatalogFetch(Protocol):
    """Where an origin reloads its catalog from."""

    async def everything(self) -> tuple[ItemIndex, CatalogMark]: ...

    async def some(self, item_ids: Sequence[str]) -> tuple[list[Item], Matrix]:
        """The items of ``item_ids`` the source holds (the others were deleted)."""
        ...


@dataclass
class ReplicaFetch:
    source: CatalogOrigin

    async def everything(self) -> tuple[ItemIndex, CatalogMark]:
        snapshot = await self.source.snapshot()
        return await index_of(snapshot), snapshot.mark

    async def some(self, item_ids: Sequence[str]) -> tuple[list[Item], Matrix]:
        snapshot = await self.source.items(item_ids)
        return snapshot.items, snapshot.vectors


@dataclass
class StoreFetch:
    store: VectorStore
    redis: RedisClient
    dim: int

    async def everything(self) -> tuple[ItemIndex, CatalogMark]:
        mark = await read_mark(self.redis, self.store)  # first: see ``read_mark``
        return await load_index(self.store, self.dim), mark

    async def some(self, item_ids: Sequence[str]) -> tuple[list[Item], Matrix]:
        return await self.store.items_of(item_ids)


@dataclass
class FollowerStats:
    reloads: int = 0  # reloads applied (a merged burst counts once)
    everything: int = 0  # of which whole catalogs
    items: int = 0  # items fetched by partial reloads
    failures: int = 0
    last_error: str | None = None


class CatalogFollower:
    """``note`` a reload (and the mark it leads to); ``run`` applies what is pending."""

    def __init__(
        self, origin: Origin, fetch: CatalogFetch, *, rng: random.Random | None = None
    ) -> None:
        self._origin = origin
        self._fetch = fetch
        self._pending = NOTHING
        self._mark: CatalogMark | None = None  # the mark the pending reload leads to
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._backoff = Backoff(
            base_s=RETRY_BASE_S,
            cap_s=RETRY_CAP_S,
            jitter="equal",
            draw=(rng or random.Random()).random,
        )
        self.stats = FollowerStats()

    @property
    def pending(self) -> Reload:
        return self._pending

    def note(self, reload: Reload, mark: CatalogMark | None = None) -> None:
        """Reload ``reload`` soon; ``mark``: the catalog's after it (None: unknown, as
        after a gap; a whole reload learns it)."""
        if reload.nothing:
            return
        self._pending = merged(self._pending, reload)
        self._mark = mark
        self._idle.clear()
        self._wake.set()

    async def settled(self) -> None:
        """Until nothing is pending (tests, and a stop that wants the catalog current)."""
        await self._idle.wait()

    async def run(self, stop: asyncio.Event) -> None:
        """Apply pending reloads until ``stop``; never raises but for cancellation."""
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                if self._pending.nothing:
                    self._idle.set()
                    waking = asyncio.ensure_future(self._wake.wait())
                    await asyncio.wait({waking, stopping}, return_when=asyncio.FIRST_COMPLETED)
                    waking.cancel()
                    self._wake.clear()
                    continue
                await self._attempt(stopping)
        finally:
            stopping.cancel()

    async def _attempt(self, stopping: asyncio.Future[Any]) -> None:
        reload, mark = self._pending, self._mark
        self._pending, self._mark = NOTHING, None
        try:
            await self._apply(reload, mark)
        except Exception as exc:  # a source down, a store refusing: tried again, never fatal
            self.stats.failures += 1
            self.stats.last_error = repr(exc)
            # Kept, under what was noted meanwhile (whose mark, if any, is the newer).
            self._pending = merged(reload, self._pending)
            self._mark = self._mark if self._mark is not None else mark
            pause = self._backoff.next()
            log.warning("catalog reload failed (%r); again in %.2fs", exc, pause)
            await asyncio.wait({stopping}, timeout=pause)
        else:
            self._backoff.reset()

    async def _apply(self, reload: Reload, mark: CatalogMark | None) -> None:
        origin = self._origin
        async with origin.catalog_writes:
            if reload.everything:
                index, held = await self._fetch.everything()
                await origin.replace_index(index, held)
                self.stats.everything += 1
                log.info("catalog reloaded: %d items, mark %s", len(index), held)
            else:
                items, vectors = await self._fetch.some(reload.item_ids)
                found = {item.item_id for item in items}
                gone = [i for i in reload.item_ids if i not in found]
                before = origin.index
                index = await asyncio.to_thread(_changed, before, items, vectors, gone)
                await origin.replace_index(index, mark)
                self.stats.items += len(items)
        self.stats.reloads += 1


def _changed(index: ItemIndex, items: list[Item], vectors: Matrix, gone: list[str]) -> ItemIndex:
    """``index`` with ``gone`` out and ``items`` in (one rebuild when nothing is gone)."""
    kept = index.without(gone)
    return kept.upserted(items, vectors) if items else kept
