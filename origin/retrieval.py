"""Candidate retrieval: the items worth ranking for one request, with a base score each.

Sources, merged in this order with duplicates dropped (the first source keeps the item):

- collaborative: nearest items to the user's streaming embedding (learned from behaviour);
- content: nearest items to the mean of the session's last interacted items;
- trending: demand blended with freshness, the same for everybody;
- fresh: the newest items (so a new arrival can be found before it has demand).

Cold users (no embedding, no session) get trending and fresh items only; sparse users
(a session but no embedding yet) get content, trending and fresh. Every source honours the
request's filters (one mask). The base score in [0, 1] is the same formula for every
candidate of a request, so the sources compete on one scale: similarity to the user
(embedding, else session) blended with demand, or the trending score for cold users.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from origin.item_index import ItemIndex, Mask

Rows = npt.NDArray[np.intp]

SIMILARITY_WEIGHT = 0.85


class Source(IntEnum):
    COLLABORATIVE = 0
    CONTENT = 1
    TRENDING = 2
    FRESH = 3


# Share of the candidate budget per source, for users with and without an embedding.
KNOWN_SHARES = {Source.COLLABORATIVE: 0.55, Source.CONTENT: 0.2, Source.TRENDING: 0.15}
SPARSE_SHARES = {Source.CONTENT: 0.6, Source.TRENDING: 0.25}
COLD_SHARES = {Source.TRENDING: 0.8}
# Whatever the shares leave goes to fresh items.


@dataclass(frozen=True)
class Candidates:
    rows: Rows
    source: npt.NDArray[np.int8]
    base: npt.NDArray[np.float64]
    # Cosine similarity to the user (embedding, else session) mapped to [0, 1]; 0.5 when
    # neither is known.
    similarity: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return int(self.rows.size)


def retrieve(
    index: ItemIndex,
    mask: Mask,
    budget: int,
    *,
    user_vector: npt.NDArray[np.float32] | None,
    session_vector: npt.NDArray[np.float32] | None,
) -> Candidates:
    if user_vector is not None:
        shares = dict(KNOWN_SHARES)
        if session_vector is None:
            shares[Source.COLLABORATIVE] += shares.pop(Source.CONTENT)
    elif session_vector is not None:
        shares = dict(SPARSE_SHARES)
    else:
        shares = dict(COLD_SHARES)
    shares[Source.FRESH] = max(0.0, 1.0 - sum(shares.values()))

    parts: list[tuple[Source, Rows]] = []
    for source, share in shares.items():
        k = round(budget * share)
        if k > 0:
            vector = {Source.COLLABORATIVE: user_vector, Source.CONTENT: session_vector}.get(source)
            parts.append((source, _source_rows(index, mask, source, k, vector)))

    if not parts:
        empty = np.empty(0, np.intp)
        return Candidates(empty, np.empty(0, np.int8), np.empty(0), np.empty(0))
    all_rows = np.concatenate([rows for _, rows in parts])
    all_sources = np.concatenate([np.full(rows.size, s, np.int8) for s, rows in parts])
    _, first = np.unique(all_rows, return_index=True)
    keep = np.sort(first)[:budget]
    rows, sources = all_rows[keep], all_sources[keep]

    reference = user_vector if user_vector is not None else session_vector
    if reference is None:
        similarity = np.full(rows.size, 0.5)
        base = index.trending[rows].astype(np.float64)
    else:
        unit = reference / max(float(np.linalg.norm(reference)), 1e-12)
        # float32 rounding can put a cosine a hair outside [-1, 1]
        similarity = np.clip((index.vectors[rows] @ unit + 1.0) / 2.0, 0.0, 1.0).astype(np.float64)
        popularity = index.popularity[rows].astype(np.float64)
        base = SIMILARITY_WEIGHT * similarity + (1 - SIMILARITY_WEIGHT) * popularity
    return Candidates(rows, sources, np.clip(base, 0.0, 1.0), similarity)


def _source_rows(
    index: ItemIndex,
    mask: Mask,
    source: Source,
    k: int,
    vector: npt.NDArray[np.float32] | None,
) -> Rows:
    if vector is not None:
        rows, _ = index.nearest(vector, k, mask)
        return rows
    if source == Source.FRESH:
        return index.fresh(k, mask)
    return index.popular(k, mask)
