"""The catalog in memory, columnar, for retrieval on the request path.

Loaded from Qdrant at start-up. Filters become one boolean mask over the columns; nearest
neighbours are one matrix-vector product plus ``argpartition`` (exact, about a millisecond
at 100K items of dimension 128 on one core); popular items come from an order computed once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from origin.catalog import Availability, Item
from origin.exceptions import CatalogError

Rows = npt.NDArray[np.intp]
Mask = npt.NDArray[np.bool_]

# How much freshness counts next to demand in the trending order.
TRENDING_FRESHNESS_WEIGHT = 0.2


@dataclass(frozen=True)
class Filters:
    """What a request allows; ``categories=None`` means every category."""

    categories: frozenset[str] | None = None
    price_min: float | None = None
    price_max: float | None = None
    exclude: frozenset[str] = frozenset()
    include_out_of_stock: bool = False


class ItemIndex:
    def __init__(self, items: list[Item], vectors: npt.NDArray[np.float32]) -> None:
        if not items:
            raise CatalogError("the catalog is empty: run `perso catalog ingest` first")
        if vectors.ndim != 2 or vectors.shape[0] != len(items):
            raise CatalogError(f"{len(items)} items but vectors of shape {vectors.shape}")
        self.items = items
        self.dim = int(vectors.shape[1])
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        self.vectors = np.ascontiguousarray(vectors / norms, dtype=np.float32)
        self.row_of = {item.item_id: row for row, item in enumerate(items)}
        categories = sorted({item.category for item in items})
        self._category_code = {name: code for code, name in enumerate(categories)}
        self.category = np.array([self._category_code[i.category] for i in items], np.int32)
        self.price = np.array([i.price for i in items], np.float64)
        self.in_stock = np.array([i.availability != Availability.OUT_OF_STOCK for i in items])
        self.popularity = np.array([i.popularity for i in items], np.float32)
        self.freshness = np.array([i.freshness for i in items], np.float32)
        self.trending = (
            1 - TRENDING_FRESHNESS_WEIGHT
        ) * self.popularity + TRENDING_FRESHNESS_WEIGHT * self.freshness
        self.trending_order: Rows = np.argsort(-self.trending, kind="stable")

    def __len__(self) -> int:
        return len(self.items)

    @classmethod
    def from_batches(
        cls, batches: Iterable[tuple[list[Item], npt.NDArray[np.float32]]]
    ) -> ItemIndex:
        items: list[Item] = []
        matrices = []
        for batch_items, matrix in batches:
            items.extend(batch_items)
            matrices.append(matrix)
        if not items:
            raise CatalogError("the catalog is empty: run `perso catalog ingest` first")
        return cls(items, np.concatenate(matrices))

    def upserted(self, items: list[Item], vectors: npt.NDArray[np.float32]) -> ItemIndex:
        """A new index with ``items`` added or replacing the rows of the same ids.

        The current index is left untouched (readers keep using it); the caller swaps the
        new one in. Building is O(catalog), so call it off the event loop for big catalogs.
        """
        if vectors.shape != (len(items), self.dim):
            raise CatalogError(f"{len(items)} items but vectors of shape {vectors.shape}")
        merged_items = list(self.items)
        merged_vectors = self.vectors.copy()
        appended_items: list[Item] = []
        appended_rows: list[int] = []
        for position, item in enumerate(items):
            row = self.row_of.get(item.item_id)
            if row is None:
                appended_items.append(item)
                appended_rows.append(position)
            else:
                merged_items[row] = item
                merged_vectors[row] = vectors[position]
        if appended_items:
            merged_items.extend(appended_items)
            merged_vectors = np.concatenate([merged_vectors, vectors[appended_rows]])
        return type(self)(merged_items, merged_vectors)

    def mask(self, filters: Filters) -> Mask:
        mask: Mask = (
            np.ones(len(self.items), dtype=bool)
            if filters.include_out_of_stock
            else (self.in_stock.copy())
        )
        if filters.categories is not None:
            codes = [self._category_code[c] for c in filters.categories if c in self._category_code]
            mask &= np.isin(self.category, codes)
        if filters.price_min is not None:
            mask &= self.price >= filters.price_min
        if filters.price_max is not None:
            mask &= self.price <= filters.price_max
        for item_id in filters.exclude:
            row = self.row_of.get(item_id)
            if row is not None:
                mask[row] = False
        return mask

    def nearest(
        self, query: npt.NDArray[np.float32], k: int, mask: Mask
    ) -> tuple[Rows, npt.NDArray[np.float32]]:
        """Up to ``k`` allowed rows by cosine similarity to ``query``, best first."""
        if query.shape != (self.dim,):
            raise ValueError(f"query has shape {query.shape}, index dimension is {self.dim}")
        norm = float(np.linalg.norm(query))
        sims = self.vectors @ (query / norm if norm > 0 else query)
        allowed = np.flatnonzero(mask)
        if allowed.size == 0 or k <= 0:
            return np.empty(0, np.intp), np.empty(0, np.float32)
        candidate_sims = sims[allowed]
        if allowed.size > k:
            top = np.argpartition(-candidate_sims, k - 1)[:k]
        else:
            top = np.arange(allowed.size)
        order = top[np.argsort(-candidate_sims[top], kind="stable")]
        return allowed[order], candidate_sims[order].astype(np.float32)

    def popular(self, k: int, mask: Mask) -> Rows:
        """Up to ``k`` allowed rows in trending order."""
        if k <= 0:
            return np.empty(0, np.intp)
        return self.trending_order[mask[self.trending_order]][:k]
