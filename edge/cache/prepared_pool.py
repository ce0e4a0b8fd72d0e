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
    # A pool joined with rows of another (``joined``: a user's own candidates): the two,
    # and the rows of the second taken; None: a pool as filled.
    parts: Joined | None = None

    @classmethod
    def of(cls, pool: Pool, *, vector_terms: bool = True) -> PreparedPool:
        """``pool`` prepared; its vectors' terms (float64 and squared) computed now unless
        not ``vector_terms`` (rows only ever ranked joined to a pool's: ``joined``)."""
        rows_of: dict[str, tuple[int, ...]] = {}
        for row, item_id in enumerate(pool.item_ids):
            rows_of[item_id] = (*rows_of.get(item_id, ()), row)
        codes: dict[str, int] = {}
        category_codes = np.fromiter(
            (codes.setdefault(c, len(codes)) for c in pool.categories), np.intp, len(pool)
        )
        value = pool.value.astype(np.float64)
        terms = ItemTerms.of(pool.vectors, pool.alpha, pool.beta, tie_keys(pool.item_ids))
        return cls(
            pool=pool,
            terms=terms.with_vector_terms() if vector_terms else terms,
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

    def joined(self, other: PreparedPool, rows: npt.NDArray[np.intp]) -> PreparedPool:
        """This pool's rows, then the ``rows`` of ``other`` (rows of items this pool lacks,
        in its context cell), prepared as one pool; ``parts`` says where each came from."""
        if not rows.size:
            return self
        n = len(self)
        taken = rows.tolist()
        rows_of = dict(self.rows_of)
        for offset, row in enumerate(taken):
            item_id = other.pool.item_ids[row]
            rows_of[item_id] = (*rows_of.get(item_id, ()), n + offset)
        codes = {c: k for k, c in enumerate(self.categories)}
        other_codes = np.fromiter(
            (codes.setdefault(other.categories[k], len(codes)) for k in other.category_codes[rows]),
            np.intp,
            rows.size,
        )
        value = np.concatenate([self.value, other.value[rows]])
        return PreparedPool(
            pool=self.pool.joined(other.pool, rows),
            terms=self.terms.joined(other.terms.take(rows)),
            rows_of=rows_of,
            categories=tuple(codes),
            category_codes=np.concatenate([self.category_codes, other_codes]),
            value=value,
            valued=bool(np.any(value != 1.0)),
            heads=self.heads + tuple(other.heads[k] for k in taken),
            sources=self.sources + tuple(other.sources[k] for k in taken),
            population=self.population,
            terms_version=self.terms_version,
            parts=Joined(self, other, rows),
        )

    @property
    def extra_size(self) -> int:
        """Bytes it holds beyond the pool's, roughly."""
        t = self.terms
        arrays = t.vectors.nbytes + t.squares.nbytes + 4 * t.alpha.nbytes
        arrays += self.category_codes.nbytes + self.value.nbytes
        return arrays + sum(len(h) + ROW_OVERHEAD for h in self.heads)


@dataclass(frozen=True, slots=True, eq=False)
class Joined:
    """Where a joined pool's rows come from: all of ``base``'s, then ``rows`` of ``other``."""

    base: PreparedPool
    other: PreparedPool
    rows: npt.NDArray[np.intp]


def _population(pool: Pool) -> Population | None:
    if pool.population is None:
        return None
    try:
        return population_from_bytes(pool.population)
    except MalformedMessage as exc:
        log.warning("a pool's population prior is unreadable, ranked without: %s", exc)
        return None
