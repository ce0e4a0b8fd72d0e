"""Ranking a segment's candidate pool (``protocol.pools``) for one user at the edge, with
the code the origin ranks with (``relevance``): the user's model drawn (Thompson sampling
on their own posterior), the pool's item posteriors drawn in the pool's context cell, their
stated preferences (hidden categories out, the others shifted: ``relevance.preferences``),
what each item's engagements are worth (``relevance.item_value``), the request's
exclusions, and each shown item's propensity, re-sampled as the origin does
(``relevance.slate.decide``).

What the origin does and an edge cannot: the emotion rules (off by default; they need the
user's session as the origin keeps it), LLM headlines and explanations (a request asking
for explanations is ranked by the origin), and telling a random pick from a trending one
(an item a draw explored is ``exploration`` either way; one the means chose keeps the
source retrieval gave it).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np
import orjson

from edge.cache import CachedItem
from protocol.api import Source
from protocol.pools import Pool
from relevance.item_value import value_shift
from relevance.normal import cdf
from relevance.preferences import excluded, shifts
from relevance.slate import DRAWS, PRESELECT, Candidates, decide, mean_scores
from relevance.user_model import UserModel


@dataclass(frozen=True, slots=True)
class PoolRanking:
    """A slate ranked from a pool: the chosen pool rows best first, each as it will be
    sent, with its drawn score and propensity."""

    rows: tuple[int, ...]
    items: tuple[CachedItem, ...]
    scores: tuple[float, ...]  # the drawn engagement probability, in [0, 1]
    propensities: tuple[float, ...]
    exploration_applied: bool


def rank_pool(
    pool: Pool,
    model: UserModel,
    *,
    count: int,
    exclude: Collection[str],
    preferences: Mapping[str, float],
    spread: float,
    value_weight: float,
    rng: np.random.Generator,
    preselect: int = PRESELECT,
    draws: int = DRAWS,
) -> PoolRanking:
    """The best ``count`` of ``pool`` for the user of ``model``."""
    hidden = excluded(preferences)
    keep = [
        n
        for n, (item_id, category) in enumerate(zip(pool.item_ids, pool.categories, strict=True))
        if item_id not in exclude and category not in hidden
    ]
    rows = np.array(keep, np.intp)
    vectors = pool.vectors[rows].astype(np.float32)
    alpha = pool.alpha[rows].astype(np.float64)
    beta = pool.beta[rows].astype(np.float64)
    shift = shifts([pool.categories[n] for n in keep], preferences)
    value = pool.value[rows]
    if value_weight > 0 and bool(np.any(value != 1.0)):
        mean, _ = mean_scores(Candidates(vectors, alpha, beta, shift), model)
        shift = shift + value_shift(mean, value.astype(np.float64), value_weight)
    slate = decide(
        Candidates(vectors, alpha, beta, shift),
        model,
        count,
        rng,
        spread=spread,
        preselect=preselect,
        draws=draws,
    )
    chosen = rows[slate.rows]
    scores = [round(float(p), 6) for p in cdf(slate.scores)]
    items = tuple(
        _item(pool, int(row), score, "exploration" if explored else pool.sources[int(row)])
        for row, score, explored in zip(chosen, scores, slate.exploration, strict=True)
    )
    return PoolRanking(
        rows=tuple(int(r) for r in chosen),
        items=items,
        scores=tuple(scores),
        propensities=tuple(float(p) for p in slate.propensities),
        exploration_applied=bool(slate.exploration.any()),
    )


def _item(pool: Pool, row: int, score: float, source: Source) -> CachedItem:
    """The item as the origin's answer shows it (``RankedItem`` but rank and explanation)."""
    item_id = pool.item_ids[row]
    members = b'"item_id":%b,"score":%b,"source":"%b","metadata":%b' % (
        orjson.dumps(item_id),
        orjson.dumps(score),
        source.encode(),
        pool.metadata[row],
    )
    return CachedItem(item_id, members, b"null")
