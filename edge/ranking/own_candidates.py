"""A known user's own candidates at the edge (edge retrieval): the items nearest
their model, beside their segment's pool.

A pool is its segment's retrieval (``protocol.pools``): it holds what everyone of the
segment might like, not what this user's model points to, which the origin adds to every
personal ranking (``origin.ranking.retrieval``'s collaborative share, 175 of 500
candidates). An edge that ranks a known user from the pool alone misses those, and more so
the larger the catalog. So when an edge draws a user's bank (``edge.ranking.run_banks``), it
retrieves the ``k`` items of highest dot product with the user's model mean from its own copy
of the catalog's vectors (``edge.ranking.item_vectors``), as the origin's collaborative
retrieval does, and ranks the pool joined with those of them the pool lacks
(``PreparedPool.joined``): those of them the shop has evidence on (an engagement posterior
over all contexts: ``seen_only``). An unseen item is left to its segment's pool, where the
segment's users explore it together: ranked beside the pool as well, every user's unseen
neighbours, spread over the catalog, took impressions each of which taught little (on the
tuning worlds, seed 101: large_catalog 79.4% final-tenth regret with them, 75.9% without
own candidates, 74.6% with the seen ones alone; clicks 63.3, 63.6, 61.7).

What ranking needs of those items besides their vectors (their posteriors in the pool's
context cell, what an engagement with them is worth, their category and the JSON the answer
shows) the origin sends as rows of the pool (``POST /v1/internal/pools/items``), off the
request path: the items a draw finds missing are asked for in the background, gathered
for ``gather_s`` (``PERSO_EDGE_OWN_CANDIDATES_GATHER_S``) and sent in one call, so that an
edge asks at most once every ``gather_s`` per context cell whatever its traffic (each call
at once instead: 0.381 calls a request, 12 rows each, in ``benchmarks.hit_ratio --live``),
and the user's next draw ranks them (a draw never waits). They are
held per context cell and what the constraints allow (``extension_key``: the categories
and the price range), as an ``Extension`` shared by every pool of that cell and those
constraints (each segment has its own pool) and by their users, across the pools'
refills: an item's rows are nobody's data, and which of them a user ranks is chosen by
their own retrieval alone. (Held per pool fill instead, every refill, a minute apart at the
default TTL, asked for them all again: 0.667 origin calls a request in
``benchmarks.hit_ratio --live``; per pool, 0.525.) Their posteriors are brought up
to date by the workers' stream as the pool's are (``LivePosteriors``: the newest streamed
rows, 200,000 of them), and an unseen one inherits its category's rate among the pool's
candidates and them together (``LivePosteriors.beside``: the
origin's cold priors over its whole candidate set, not over the few items asked for
together, which made a user's unseen neighbours look like the hits beside them); an item
whose stock or price changes (``ItemUpdate``), or the catalog changes (``ItemsChanged``),
is asked for again before it is ranked, and the origin leaves it out when the pool's
constraints no longer allow it; a change of the whole catalog, or a gap in the sync
stream, drops every extension (``clear``).

Bounded: ``MAX_ROWS`` rows per extension (then no more are asked for), ``MAX_EXTENSIONS``
extensions, least recently used first out.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from edge.cache.prepared_pool import PreparedPool
from edge.exceptions import OriginRejected, OriginUnavailable
from edge.ranking.item_vectors import ItemVectorTable
from protocol.api import Constraints
from protocol.pools import MAX_POOL_ITEMS, Pool, PoolItemsRequest

log = logging.getLogger(__name__)

# The origin's collaborative share of a 500-candidate retrieval (``origin.ranking.retrieval``).
DEFAULT_K = 175
MAX_ROWS = 5_000
MAX_EXTENSIONS = 64
# After a failed call, the pool's missing items are asked for again no sooner than this.
RETRY_S = 5.0
# How long the items draws find missing are gathered before one call asks for them.
GATHER_S = 5.0

FetchRows = Callable[[PoolItemsRequest], Awaitable[Pool]]
# Rows as ranked beside a pool (``LivePosteriors.beside``): their posteriors brought up to
# date, with the cold priors of the pool and them together.
Beside = Callable[[PreparedPool, PreparedPool], PreparedPool]


@dataclass(slots=True, eq=False)
class Extension:
    """The rows an edge was sent of items outside one pool that its users' own retrieval
    found, in the pool's cell and under its fill's constraints."""

    cell: str
    constraints: Constraints
    rows: PreparedPool | None = None
    asked: set[str] = field(default_factory=set)  # answered, refused or in flight
    wanted: dict[str, None] = field(default_factory=dict)  # to ask for next, in order
    stale: set[str] = field(default_factory=set)  # held rows not to rank (stock, price)
    version: int = 0  # one more each time rows came or went stale
    fetching: bool = False
    retry_at: float = 0.0


@dataclass
class OwnCounters:
    joined: int = 0  # draws that ranked some of the user's own candidates
    rows_ranked: int = 0  # own candidates ranked, over all draws
    missing: int = 0  # own candidates a draw found not yet sent (asked for)
    fetches: int = 0  # calls for rows
    fetch_failures: int = 0
    rows_fetched: int = 0


class OwnCandidates:
    def __init__(
        self,
        vectors: ItemVectorTable,
        fetch: FetchRows,
        *,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        gather_s: float = GATHER_S,
        k: int = DEFAULT_K,
        seen_only: bool = True,
        max_rows: int = MAX_ROWS,
        max_extensions: int = MAX_EXTENSIONS,
    ) -> None:
        if k <= 0:
            raise ValueError(f"k must be positive, not {k}")
        if gather_s < 0:
            raise ValueError(f"gather_s must not be negative, not {gather_s}")
        self.vectors = vectors
        self._fetch = fetch
        self._clock = clock
        self._sleep = sleep
        self._gather_s = gather_s
        self.k = k
        self.seen_only = seen_only
        self._max_rows = max_rows
        self._max_extensions = max_extensions
        self._extensions: OrderedDict[str, Extension] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()
        self.counters = OwnCounters()

    def __len__(self) -> int:
        return len(self._extensions)

    def version(
        self, pool: PreparedPool, constraints: Constraints, beside: Beside
    ) -> tuple[int, int]:
        """What a draw over ``pool`` for a request of ``constraints`` would join now: its
        extension's version and its rows' terms version (a bank drawn from other ones is
        void)."""
        extension = self._extensions.get(extension_key(pool.pool.context, constraints))
        if extension is None or extension.rows is None:
            return (0, 0)
        return (extension.version, beside(extension.rows, pool).terms_version)

    def joined(
        self,
        pool: PreparedPool,
        vector: npt.NDArray[np.floating],
        constraints: Constraints,
        beside: Beside,
    ) -> PreparedPool:
        """``pool`` joined with the rows held of the user's own candidates (the ``k`` items
        nearest ``vector``) that it lacks; those not held yet are asked for in the
        background. ``pool`` itself when there are none (or no vectors are loaded yet)."""
        nearest = self.vectors.nearest(vector, self.k)
        own = [i for i in nearest if i not in pool.rows_of]
        if not own:
            return pool
        key = extension_key(pool.pool.context, constraints)
        extension = self._extension(key, pool.pool.context, constraints)
        missing = [i for i in own if i not in extension.asked]
        if missing:
            self.counters.missing += len(missing)
            self._want(key, extension, missing)
        rows = extension.rows
        if rows is None:
            return pool
        held = beside(rows, pool)
        seen = held.pool.stored
        taken = [
            row
            for row in (held.rows_of[i][-1] for i in own if i in held.rows_of)
            if held.pool.item_ids[row] not in extension.stale
            and (not self.seen_only or seen is None or seen[row, 3] > 0)
        ]
        if not taken:
            return pool
        self.counters.joined += 1
        self.counters.rows_ranked += len(taken)
        return pool.joined(held, np.array(taken, np.intp))

    def item_changed(self, item_id: str) -> None:
        """The item changed (its stock, price or catalog entry) or was deleted: not ranked
        from the rows held until sent again (the origin leaves it out when no longer
        allowed)."""
        for extension in self._extensions.values():
            if extension.rows is not None and item_id in extension.rows.rows_of:
                extension.stale.add(item_id)
                extension.asked.discard(item_id)
                extension.version += 1  # banks drawn with it are void

    def clear(self) -> None:
        """Every extension dropped (the whole catalog changed, or sync messages were lost):
        the rows are asked for again as draws find them missing. Calls in flight land in
        the dropped extensions."""
        self._extensions.clear()

    async def settled(self) -> None:
        """Wait until the rows asked for so far have come (or the calls failed)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _extension(self, key: str, cell: str, constraints: Constraints) -> Extension:
        extension = self._extensions.get(key)
        if extension is None:
            fill = constraints.model_copy(update={"exclude_items": [], "count": 1})
            extension = self._extensions[key] = Extension(cell, fill)
            while len(self._extensions) > self._max_extensions:
                self._extensions.popitem(last=False)
        self._extensions.move_to_end(key)
        return extension

    def _want(self, key: str, extension: Extension, ids: list[str]) -> None:
        held = 0 if extension.rows is None else len(extension.rows)
        room = self._max_rows - held - len(extension.wanted)
        for item_id in ids[: max(0, room)]:
            extension.wanted[item_id] = None
        if extension.fetching or not extension.wanted or self._clock() < extension.retry_at:
            return
        extension.fetching = True
        task = asyncio.get_running_loop().create_task(self._fetch_wanted(key, extension))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _fetch_wanted(self, key: str, extension: Extension) -> None:
        try:
            while extension.wanted and self._extensions.get(key) is extension:
                if self._gather_s > 0:
                    await self._sleep(self._gather_s)  # what later draws find missing too
                batch = list(extension.wanted)[:MAX_POOL_ITEMS]
                for item_id in batch:
                    del extension.wanted[item_id]
                extension.asked.update(batch)
                self.counters.fetches += 1
                request = PoolItemsRequest(
                    cell=extension.cell, constraints=extension.constraints, item_ids=batch
                )
                try:
                    sent = await self._fetch(request)
                except (OriginUnavailable, OriginRejected) as exc:
                    self.counters.fetch_failures += 1
                    extension.asked.difference_update(batch)
                    extension.retry_at = self._clock() + RETRY_S
                    log.info("own candidates' rows not sent, asked again later: %s", exc)
                    return
                self._hold(extension, sent)
        finally:
            extension.fetching = False

    def _hold(self, extension: Extension, sent: Pool) -> None:
        if sent.context != extension.cell:
            log.warning("rows of cell %s sent for cell %s: refused", sent.context, extension.cell)
            return
        # What is sent again is current; what is not (no longer allowed) stays out.
        extension.stale.difference_update(sent.item_ids)
        if not len(sent):
            return
        if extension.rows is None:
            pool = sent
        else:
            # An item sent again (it changed) replaces the row held of it.
            held = extension.rows.pool.without(frozenset(sent.item_ids))
            pool = held.joined(sent, np.arange(len(sent), dtype=np.intp))
        extension.rows = PreparedPool.of(pool, vector_terms=False)
        extension.version += 1
        self.counters.rows_fetched += len(sent)


def extension_key(cell: str, constraints: Constraints) -> str:
    """Which rows a ranking in ``cell`` under ``constraints`` may join: those sent for that
    cell and for what the constraints allow (their categories, in any order, and price
    range; not the count nor the exclusions, which the ranking applies)."""
    # No categories and an empty list allow the same (``constraint_filters``): any.
    categories = ",".join(sorted(constraints.categories or ()))
    price = constraints.price_range
    allowed = "" if price is None else f"{price.min}:{price.max}"
    return f"{cell}|{categories}|{allowed}"
