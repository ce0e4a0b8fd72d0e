"""How large a segment's candidate pool must be (``benchmarks.edge_ranking_quality``): the
pools of smaller sizes read off one pool of the largest, and what each holds of a user's
personal top items.

The origin builds a pool (``origin.ranking.pools.build_pool``) from one retrieval's
candidates: the shared answer's own items always, then the best others by optimistic score,
up to the size, and sends it ordered by that score. So a pool of any size up to the one
fetched is a function of the fetched pool and the answer's items (``pool_at_size``): the
answer's items in the pool's order, then the others in the pool's order, the first
``size``; the same candidates, the same posteriors, no second retrieval (whose random
share would differ). ``tests/unit/benchmarks/test_pool_sizing.py`` checks it against
``build_pool`` itself.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np

from edge.ranking.pool_ranking import rank_pool
from protocol.pools import Pool
from relevance.user_model import UserModel


def pool_at_size(item_ids: Sequence[str], shown: Collection[str], size: int) -> list[str]:
    """The items a pool of ``size`` would hold, from a larger pool's ``item_ids`` (ordered
    by optimistic score, as sent) and its answer's items ``shown``; in the pool's order."""
    shown_set = set(shown)
    first = [i for i in item_ids if i in shown_set]
    rest = [i for i in item_ids if i not in shown_set]
    kept = set((first + rest)[:size])
    return [i for i in item_ids if i in kept]


def recall(top: Sequence[str], pool: Collection[str]) -> float:
    """The share of ``top`` the pool holds (1.0 for an empty ``top``)."""
    if not top:
        return 1.0
    held = set(pool)
    return sum(1 for i in top if i in held) / len(top)


def restricted(pool: Pool, item_ids: Collection[str]) -> Pool:
    """``pool`` with only ``item_ids`` left, in its order."""
    keep = set(item_ids)
    return pool.without([i for i in pool.item_ids if i not in keep])


def means_slate(
    pool: Pool,
    model: UserModel,
    *,
    count: int,
    preferences: Mapping[str, float],
    value_weight: float,
) -> list[str]:
    """The slate the edge ranks from ``pool`` for the user of ``model`` at exploration 0
    (posterior means: deterministic), with the edge's own code."""
    ranking = rank_pool(
        pool,
        model,
        count=count,
        exclude=(),
        preferences=preferences,
        spread=0.0,
        value_weight=value_weight,
        rng=np.random.default_rng(0),  # no draws at spread 0
    )
    return [item.item_id for item in ranking.items]


def recommended_size(
    ratio_by_size: Mapping[int, float], recall_by_size: Mapping[int, float], tolerance: float
) -> int:
    """The smallest size whose expected clicks (``ratio_by_size``, relative to the origin's)
    and recall are both within ``tolerance`` of the largest size's."""
    largest = max(ratio_by_size)
    for size in sorted(ratio_by_size):
        close_clicks = ratio_by_size[size] >= ratio_by_size[largest] - tolerance
        close_recall = recall_by_size[size] >= recall_by_size[largest] - tolerance
        if close_clicks and close_recall:
            return size
    return largest
