"""The slice's scorer: cold users get trending items, known users their nearest items.

A deliberately simple stand-in for the full pipeline (retrieval merge, contextual Thompson
sampling, emotion-aware re-ranking), which the origin-ranking issue builds. Pure functions
over an ``ItemIndex``: same inputs, same ranking.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from origin.item_index import Filters, ItemIndex
from protocol.api import Source

# How many nearest neighbours to look at per requested item before blending in demand.
CANDIDATES_PER_RESULT = 4
SIMILARITY_WEIGHT = 0.85


@dataclass(frozen=True, slots=True)
class Scored:
    row: int
    score: float
    source: Source
    reason: str
    signals: tuple[str, ...]


_TRENDING_REASON = "Popular right now"
_CONTENT_REASON = "Similar to items you engaged with recently"


def rank_cold(index: ItemIndex, filters: Filters, count: int) -> list[Scored]:
    rows = index.popular(count, index.mask(filters))
    return [_trending(index, int(row)) for row in rows]


def rank_known(
    index: ItemIndex, user_vector: npt.NDArray[np.float32], filters: Filters, count: int
) -> list[Scored]:
    """Nearest items to the user's embedding, blended with demand."""
    mask = index.mask(filters)
    rows, sims = index.nearest(user_vector, count * CANDIDATES_PER_RESULT, mask)
    similarity = (sims + 1.0) / 2.0  # cosine [-1, 1] -> [0, 1]
    scores = SIMILARITY_WEIGHT * similarity + (1 - SIMILARITY_WEIGHT) * index.popularity[rows]
    order = np.argsort(-scores, kind="stable")[:count]
    ranked = [
        Scored(
            int(rows[i]),
            round(float(scores[i]), 6),
            "content",
            _CONTENT_REASON,
            ("viewed_similar", "category_match"),
        )
        for i in order
    ]
    return ranked


def _trending(index: ItemIndex, row: int) -> Scored:
    return Scored(
        row, round(float(index.trending[row]), 6), "trending", _TRENDING_REASON, ("trending",)
    )
