"""A shared fill's candidate pool (``protocol.pools.Pool``): what an edge needs to rank a
segment's candidates for its own users with ``relevance.slate``, the code the origin ranks
with.

Built from exactly what the shared answer was ranked from (one retrieval, one posterior
read): the candidates, their effective posteriors in the answer's context cell and their
engagements' values. It keeps the ``size`` best by optimistic score (mean + 2 sd, the value
shift included: ``relevance.slate.decide``'s pre-selection for a segment-wide answer), and
the answer's own items always, so the answer can be told apart from the pool by nothing.
Nothing of any user's goes in: a shared answer reads none of it.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
import orjson

from origin.catalog.item_index import ItemIndex
from origin.ranking.pipeline import api_source
from origin.ranking.response import item_metadata
from origin.ranking.retrieval import Candidates
from protocol.pools import Pool
from relevance.item_value import value_shift
from relevance.slate import Candidates as Scored
from relevance.slate import ItemTerms, mean_scores, optimistic

Array = npt.NDArray[np.float64]


def optimistic_scores(
    vectors: npt.NDArray[np.float32],
    alpha: Array,
    beta: Array,
    value: Array,
    value_weight: float,
) -> Array:
    """Each candidate's optimistic score without a user (``relevance.slate.optimistic``),
    its value shifting it as ``origin.ranking.pipeline.rank`` shifts a segment-wide
    answer's."""
    terms = ItemTerms.of(vectors, alpha, beta)
    shift = np.zeros_like(alpha)
    if value_weight > 0:
        mean, _ = mean_scores(Scored.with_terms(terms, shift), None)
        shift = value_shift(mean, value, value_weight)
    return optimistic(Scored.with_terms(terms, shift), None)


def build_pool(
    index: ItemIndex,
    candidates: Candidates,
    *,
    alpha: Array,
    beta: Array,
    value: Array,
    stored: Array | None = None,
    population: bytes | None = None,
    answer_rows: Iterable[int],
    size: int,
    value_weight: float,
    context: str,
    model_version: str,
    built_ms: int,
) -> Pool:
    """The pool of up to ``size`` of ``candidates`` (aligned with ``alpha``, ``beta``,
    ``value`` and the ``stored`` posteriors they come from), best first; ``answer_rows``
    (index rows of the answer's items) always in."""
    rows = candidates.rows
    score = optimistic_scores(index.vectors[rows], alpha, beta, value, value_weight)
    shown = np.isin(rows, np.fromiter(answer_rows, np.intp))
    # Shown items first, then by score; the pool is then ordered by score alone.
    chosen = np.lexsort((-score, ~shown))[:size]
    chosen = chosen[np.argsort(-score[chosen], kind="stable")]
    picked = rows[chosen]
    items = [index.items[int(row)] for row in picked]
    return Pool(
        context=context,
        model_version=model_version,
        built_ms=built_ms,
        item_ids=tuple(item.item_id for item in items),
        sources=tuple(api_source(int(s)) for s in candidates.source[chosen]),
        categories=tuple(item.category for item in items),
        metadata=tuple(orjson.dumps(item_metadata(item).model_dump(mode="json")) for item in items),
        vectors=index.vectors[picked].astype(np.float16).reshape(len(picked), index.dim),
        alpha=alpha[chosen].astype(np.float32),
        beta=beta[chosen].astype(np.float32),
        value=value[chosen].astype(np.float32),
        stored=None if stored is None else stored[chosen],
        population=population,
    )
