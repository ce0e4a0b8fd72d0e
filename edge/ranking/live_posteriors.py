"""The items' posteriors as the workers stream them (``sync.messages.ItemPosteriors``), and
the pools an edge ranks from brought up to date with them.

A pool (``protocol.pools``) holds each candidate's effective posterior as its origin
computed it at the fill, and the stored posteriors it came from (``Pool.stored``: the
context cell's and all contexts'). Between two fills (``PERSO_EDGE_POOL_TTL_S``) the
workers change them with every decision served and every engagement (their impressions
count at once: ``origin.worker.joins``), and stream each change to every edge. This table
keeps the newest stored row of each (cell, item) it was sent (bounded, least recently
changed first out), and ``refreshed`` recomputes a pool's effective posteriors from its
stored rows overlaid with newer ones, with the origin's code
(``relevance.item_posteriors.effective``: decay, cold priors from the pool's categories, the
cell shrunk toward all contexts): what the origin would rank the pool's items by now.

A pool is recomputed at most every ``REFRESH_S`` and only when a row of one of its items
changed since; the result is kept per pool, its ``terms_version`` one higher, so that what
was drawn from the older terms (``edge.ranking.run_banks``) is not served as drawn from these. A
pool without stored rows (from an origin that sends none) is ranked as filled.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from edge.cache.prepared_pool import PreparedPool
from protocol.pools import STORED_COLUMNS
from relevance.item_posteriors import PosteriorConfig, Posteriors, effective
from relevance.slate import ItemTerms

ALL_CONTEXTS = "all"
# How often one pool's terms are recomputed at most (seconds): each recomputation voids the
# runs banked over it; the workers' own batches are a tenth of a second apart.
REFRESH_S = 0.25
# Rows kept at most: about 100 bytes each.
MAX_ROWS = 200_000
# Pools whose refreshed copy is kept at most (a pool per segment, device and variant).
MAX_POOLS = 512

Row = tuple[float, float, float]  # alpha, beta, last change (ms)


@dataclasses.dataclass(slots=True, eq=False)
class _Refreshed:
    base: PreparedPool  # the pool as filled
    version: int  # the table's version it was brought up to
    at: float  # when (the edge's clock)
    pool: PreparedPool  # the pool as ranked: ``base`` or its recomputed copy


@dataclasses.dataclass(slots=True, eq=False)
class _Beside:
    rows: PreparedPool  # the rows as sent
    base: PreparedPool  # the pool they are ranked beside
    version: int
    at: float
    ranked: PreparedPool  # ``rows`` as ranked beside ``base``


class LivePosteriors:
    def __init__(
        self,
        config: PosteriorConfig,
        *,
        clock: Callable[[], float],
        max_rows: int = MAX_ROWS,
        refresh_s: float = REFRESH_S,
    ) -> None:
        self._config = config
        self._clock = clock
        self._max_rows = max_rows
        self._refresh_s = refresh_s
        self._rows: OrderedDict[tuple[str, str], Row] = OrderedDict()
        # per item, the table's version of its last change
        self._changed: dict[str, int] = {}
        self.version = 0
        self._pools: OrderedDict[int, _Refreshed] = OrderedDict()
        self._beside: OrderedDict[tuple[int, int], _Beside] = OrderedDict()
        self._beside_version = 0
        self.applied = 0  # rows taken
        self.recomputed = 0  # pools recomputed

    def __len__(self) -> int:
        return len(self._rows)

    def apply(self, cell: str, item_ids: Sequence[str], rows: Sequence[Row]) -> None:
        """Take the streamed rows of ``item_ids`` in ``cell``; an older row than the one held
        (a late message) changes nothing."""
        changed = False
        for item, row in zip(item_ids, rows, strict=True):
            key = (cell, item)
            held = self._rows.get(key)
            if held is not None and held[2] > row[2]:
                continue
            self._rows[key] = row
            self._rows.move_to_end(key)
            changed = True
            self._changed[item] = self.version + 1
            self.applied += 1
        if changed:
            self.version += 1
        while len(self._rows) > self._max_rows:
            (_, item), _ = self._rows.popitem(last=False)
            self._changed.pop(item, None)

    def refreshed(self, prepared: PreparedPool, now_ms: float) -> PreparedPool:
        """``prepared`` ranked by its items' posteriors as they are now (module docstring);
        itself when it carries no stored rows or none of its items changed since its fill."""
        stored = prepared.pool.stored
        if stored is None:
            return prepared
        key = id(prepared)
        kept = self._pools.get(key)
        if kept is not None and kept.base is not prepared:
            kept = None  # another pool at a recycled address
        now = self._clock()
        if kept is not None and (kept.version == self.version or now - kept.at < self._refresh_s):
            return kept.pool
        # Rows of any age may be newer than the fill's (the overlay takes only those).
        since = kept.version if kept is not None else 0
        if any(self._changed.get(i, 0) > since for i in prepared.pool.item_ids):
            base_version = kept.pool.terms_version if kept is not None else prepared.terms_version
            pool = self._recompute(prepared, stored, now_ms, base_version + 1)
            self.recomputed += 1
        else:
            pool = kept.pool if kept is not None else prepared
        self._pools[key] = _Refreshed(prepared, self.version, now, pool)
        self._pools.move_to_end(key)
        while len(self._pools) > MAX_POOLS:
            self._pools.popitem(last=False)
        return pool

    def beside(self, rows: PreparedPool, base: PreparedPool, now_ms: float) -> PreparedPool:
        """``rows`` (items outside the pool ``base``, in its cell: a user's own candidates,
        ``edge.ranking.own_candidates``) as ranked beside ``base``: their effective
        posteriors with the newest streamed rows, and with the cold priors a decision over
        ``base`` and them together gives (an unseen item inherits its category's rate among
        all the candidates, as at the origin, not among the few items asked for together).
        Recomputed at most every ``REFRESH_S``, and only when a row changed or either pool is
        another; without stored rows, ``rows`` as sent."""
        if rows.pool.stored is None or base.pool.stored is None:
            return rows
        key = (id(rows), id(base))
        kept = self._beside.get(key)
        if kept is not None and (kept.rows is not rows or kept.base is not base):
            kept = None  # other pools at recycled addresses
        now = self._clock()
        if kept is not None and (kept.version == self.version or now - kept.at < self._refresh_s):
            return kept.ranked
        self._beside_version += 1
        ranked = self._jointly(rows, base, now_ms, self._beside_version)
        self._beside[key] = _Beside(rows, base, self.version, now, ranked)
        self._beside.move_to_end(key)
        while len(self._beside) > MAX_POOLS:
            self._beside.popitem(last=False)
        return ranked

    def _jointly(
        self, rows: PreparedPool, base: PreparedPool, now_ms: float, terms_version: int
    ) -> PreparedPool:
        assert rows.pool.stored is not None
        assert base.pool.stored is not None
        stored = np.concatenate(
            [self._overlaid(base, base.pool.stored), self._overlaid(rows, rows.pool.stored)]
        )
        codes = {c: k for k, c in enumerate(base.categories)}
        theirs = np.fromiter(
            (codes.setdefault(rows.categories[k], len(codes)) for k in rows.category_codes),
            np.intp,
            len(rows),
        )
        config = self._config
        alpha, beta = effective(
            Posteriors.from_rows(stored[:, 0:3], config),
            Posteriors.from_rows(stored[:, 3:STORED_COLUMNS], config),
            np.concatenate([base.category_codes, theirs]),
            now_ms,
            config,
        )
        n = len(base)
        terms = with_posteriors(rows.terms, alpha[n:], beta[n:])
        # The rows' stored posteriors as they are now (the streamed ones overlaid).
        pool = dataclasses.replace(rows.pool, stored=stored[n:])
        return dataclasses.replace(rows, pool=pool, terms=terms, terms_version=terms_version)

    def _overlaid(
        self, prepared: PreparedPool, stored: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        """``stored`` (the pool's rows) with the newer rows streamed since."""
        rows = stored.copy()
        context = prepared.pool.context
        for n, item in enumerate(prepared.pool.item_ids):
            if item not in self._changed:
                continue
            for cell, first in ((context, 0), (ALL_CONTEXTS, 3)):
                row = self._rows.get((cell, item))
                if row is not None and row[2] >= rows[n, first + 2]:
                    rows[n, first : first + 3] = row
        return rows

    def _recompute(
        self,
        prepared: PreparedPool,
        stored: npt.NDArray[np.float64],
        now_ms: float,
        terms_version: int,
    ) -> PreparedPool:
        rows = self._overlaid(prepared, stored)
        config = self._config
        alpha, beta = effective(
            Posteriors.from_rows(rows[:, 0:3], config),
            Posteriors.from_rows(rows[:, 3:STORED_COLUMNS], config),
            prepared.category_codes,
            now_ms,
            config,
        )
        terms = with_posteriors(prepared.terms, alpha, beta)
        return dataclasses.replace(prepared, terms=terms, terms_version=terms_version)


def with_posteriors(
    terms: ItemTerms, alpha: npt.NDArray[np.float64], beta: npt.NDArray[np.float64]
) -> ItemTerms:
    """``terms`` with the items' posteriors ``alpha``, ``beta`` (the vectors' terms, computed
    once for the pool, taken along)."""
    fresh = ItemTerms.of(terms.given_vectors, alpha, beta, terms.keys)
    for name in ("vectors", "squares"):
        if name in terms.__dict__:
            fresh.__dict__[name] = terms.__dict__[name]
    return fresh
