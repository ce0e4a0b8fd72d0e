"""A segment's candidate pool (``protocol.pools.Pool``) with what ranking reads of it
computed once, when the edge stores or decodes it (``edge.cache.entry.Entry``), so that a
request ranked from it (``edge.ranking.pool_ranking``) pays only for what depends on its user and
on itself: the item terms of ``relevance.slate`` (vectors as float64 and squared, each
item's probit mean and variance), where each item id is, each row's category as a code,
whether any item is worth other than a click, and the start of each item's JSON.

The float64 vectors and their squares cost 16 bytes a number against the pool's 2 (about
0.6 MB for 300 candidates at dimension 128): ``extra_size`` is what a store charges for
them beside the pool.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import orjson

from protocol.exceptions import MalformedMessage
from protocol.pools import Pool
from relevance.population import Population, population_from_bytes
from relevance.slate import ItemTerms, tie_keys

log = logging.getLogger(__name__)

# Per item id held in ``rows_of`` and per rendered head: the objects and their slots.
ROW_OVERHEAD = 200


@dataclass(frozen=True, slots=True, eq=False)
class PreparedPool:
    pool: Pool
    terms: ItemTerms  # every row's, in the pool's order
    rows_of: Mapping[str, tuple[int, ...]]  # each item id's row (rows, were it repeated)
    categories: tuple[str, ...]  # the pool's categories, each once
    category_codes: npt.NDArray[np.intp]  # each row's category, an index into ``categories``
    value: npt.NDArray[np.float64]  # an engagement's worth relative to a click
    valued: bool  # some item is worth other than a click
    heads: tuple[bytes, ...]  # each row's JSON up to its score: b'"item_id":"it-1","score":'
    sources: tuple[bytes, ...]  # each row's ``source``, encoded
    # The users' population prior the pool's users are ranked under (the origin's at the
    # fill, ``relevance.population``); None: none (or unreadable: logged).
    population: Population | None = None
    # 0 as filled; one more each time the workers' stream changed ``terms``
    # (``edge.ranking.live_posteriors``): what was drawn from other terms is not drawn from these.
    terms_version: int = 0

    @classmethod
    def of(cls, pool: Pool) -> PreparedPool:
        rows_of: dict[str, tuple[int, ...]] = {}
        for row, item_id in enumerate(pool.item_ids):
            rows_of[item_id] = (*rows_of.get(item_id, ()), row)
        codes: dict[str, int] = {}
        category_codes = np.fromiter(
            (codes.setdefault(c, len(codes)) for c in pool.categories), np.intp, len(pool)
        )
        value = pool.value.astype(np.float64)
        return cls(
            pool=pool,
            terms=ItemTerms.of(
                pool.vectors, pool.alpha, pool.beta, tie_keys(pool.item_ids)
            ).with_vector_terms(),
            rows_of=rows_of,
            categories=tuple(codes),
            category_codes=category_codes,
            value=value,
            valued=bool(np.any(value != 1.0)),
            heads=tuple(b'"item_id":%b,"score":' % orjson.dumps(i) for i in pool.item_ids),
            sources=tuple(s.encode() for s in pool.sources),
            population=_population(pool),
        )

    def __len__(self) -> int:
        return len(self.pool)

    @property
    def extra_size(self) -> int:
        """Bytes it holds beyond the pool's, roughly."""
        t = self.terms
        arrays = t.vectors.nbytes + t.squares.nbytes + 4 * t.alpha.nbytes
        arrays += self.category_codes.nbytes + self.value.nbytes
        return arrays + sum(len(h) + ROW_OVERHEAD for h in self.heads)


def _population(pool: Pool) -> Population | None:
    if pool.population is None:
        return None
    try:
        return population_from_bytes(pool.population)
    except MalformedMessage as exc:
        log.warning("a pool's population prior is unreadable, ranked without: %s", exc)
        return None
