"""Candidate retrieval: the items worth ranking for one request.

Sources, merged in this order with duplicates dropped (the first source keeps the item):

- collaborative: the items the user's model scores highest (nearest to its mean: the
  direction the user's taste moves away from everybody's);
- content: nearest items to the mean of the session's last interacted items;
- learned: the items with the best engagement rate over all contexts
  (``origin.learned.posteriors``' rank: what everybody engages with);
- trending: the catalog's demand blended with freshness;
- fresh: the newest items (so a new arrival can be found before it has demand);
- random: a uniform sample of the allowed items, so that every item has a chance to be
  ranked, and so learnt about, whatever the other sources miss.

A user without a model gets no collaborative share, one without a session no content
share; what a source cannot use goes to the others. Every source honours the request's
filters (one mask). Candidates compete on the posterior's scores (``origin.ranking.pipeline``):
a source only puts an item in the running, it does not buy it a place in the slate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from origin.catalog.item_index import ItemIndex, Mask

Rows = npt.NDArray[np.intp]


class Source(IntEnum):
    COLLABORATIVE = 0
    CONTENT = 1
    TRENDING = 2
    FRESH = 3
    LEARNED = 4
    RANDOM = 5


# Share of the candidate budget per source, before the shares of sources without input are
# spread over the others.
SHARES = {
    Source.COLLABORATIVE: 0.35,
    Source.CONTENT: 0.15,
    Source.LEARNED: 0.2,
    Source.TRENDING: 0.1,
    Source.FRESH: 0.05,
    Source.RANDOM: 0.15,
}


@dataclass(frozen=True)
class Candidates:
    rows: Rows
    source: npt.NDArray[np.int8]

    def __len__(self) -> int:
        return int(self.rows.size)


def shares_for(*, user: bool, session: bool, learned: bool) -> dict[Source, float]:
    """The budget's shares given which inputs the request has, summing to 1."""
    shares = dict(SHARES)
    if not user:
        del shares[Source.COLLABORATIVE]
    if not session:
        del shares[Source.CONTENT]
    if not learned:
        del shares[Source.LEARNED]
    total = sum(shares.values())
    return {source: share / total for source, share in shares.items()}


def retrieve(
    index: ItemIndex,
    mask: Mask,
    budget: int,
    rng: np.random.Generator,
    *,
    user_vector: npt.NDArray[np.float32] | None,
    session_vector: npt.NDArray[np.float32] | None,
    learned: Sequence[int] = (),
) -> Candidates:
    """Up to ``budget`` distinct allowed candidates; ``learned``: rows of the best items by
    engagement over all contexts, best first."""
    learned_rows = np.array([r for r in learned if mask[r]], np.intp)
    shares = shares_for(
        user=user_vector is not None,
        session=session_vector is not None,
        learned=learned_rows.size > 0,
    )
    parts: list[tuple[Source, Rows]] = []
    for source, share in shares.items():
        k = round(budget * share)
        if k <= 0:
            continue
        if source == Source.COLLABORATIVE and user_vector is not None:
            rows, _ = index.nearest(user_vector, k, mask)
        elif source == Source.CONTENT and session_vector is not None:
            rows, _ = index.nearest(session_vector, k, mask)
        elif source == Source.LEARNED:
            rows = learned_rows[:k]
        elif source == Source.FRESH:
            rows = index.fresh(k, mask)
        elif source == Source.RANDOM:
            # With replacement (duplicates merge below): O(k), not O(catalog).
            allowed = np.flatnonzero(mask)
            rows = allowed[rng.integers(0, allowed.size, size=k)] if allowed.size else allowed
        else:
            rows = index.popular(k, mask)
        parts.append((source, np.asarray(rows, np.intp)))
    if not parts:
        return Candidates(np.empty(0, np.intp), np.empty(0, np.int8))
    all_rows = np.concatenate([rows for _, rows in parts])
    all_sources = np.concatenate([np.full(rows.size, s, np.int8) for s, rows in parts])
    _, first = np.unique(all_rows, return_index=True)
    keep = np.sort(first)[:budget]
    return Candidates(all_rows[keep], all_sources[keep])
