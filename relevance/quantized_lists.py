"""The catalog's unit vectors held as int8 in inverted-file lists: what an edge retrieves a
known user's own candidates from (``edge.ranking.item_vectors``).

The lists are ``relevance.coarse_index``'s (spherical k-means into about sqrt(n) / 2 lists,
the closest lists scanned until enough rows are seen); each row is held as int8 codes with a
float32 scale of its own (its largest absolute coordinate / 127) and scored as
(codes . query) x scale: 132 bytes an item at dimension 128 with its int32 id row, against
512 for float32. Chosen against Qdrant Edge by ``benchmarks.edge_vectors`` (docs/measured.md): at
100K items recall 0.96 of the exact scan's top 175 at p50 0.3 ms, 15 MB resident.

Rows change in place: ``with_rows`` gives the lists with some rows replaced, added or
dropped, new rows put in the list of their closest centroid (the centroids stay those of
the last ``build``: a catalog that drifted far from them is scanned less well, and a full
snapshot rebuilds them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from relevance.coarse_index import CoarseIndex

Matrix = npt.NDArray[np.float32]
Codes = npt.NDArray[np.int8]
Rows = npt.NDArray[np.intp]

# Rows scanned per result wanted, and at least this many (the origin's ``ItemIndex`` rule).
PROBE_ROWS_PER_RESULT = 16
MIN_PROBE_ROWS = 6_000


def quantized(vectors: Matrix) -> tuple[Codes, Matrix]:
    """Each row as int8 codes and its float32 scale (a zero row: scale 1, codes 0)."""
    vectors = np.asarray(vectors, np.float32)
    scales = np.ones(vectors.shape[0], np.float32)
    if vectors.size:
        scales = (np.abs(vectors).max(axis=1) / 127).astype(np.float32)
        scales[scales == 0] = 1.0
    codes = np.clip(np.rint(vectors / scales[:, None]), -127, 127).astype(np.int8)
    return codes, scales


def dequantized(codes: Codes, scales: Matrix) -> Matrix:
    out: Matrix = codes.astype(np.float32) * scales[:, None]
    return out


@dataclass(frozen=True, eq=False)
class QuantizedLists:
    centroids: Matrix  # (lists, dim), unit rows
    ids: npt.NDArray[np.int32]  # each held row's id (the caller's numbering), in list order
    offsets: npt.NDArray[np.int64]  # list l holds rows offsets[l]:offsets[l + 1]
    codes: Codes  # (rows, dim), in list order
    scales: Matrix  # (rows,)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def dim(self) -> int:
        return int(self.centroids.shape[1])

    @property
    def nbytes(self) -> int:
        arrays = (self.centroids, self.ids, self.offsets, self.codes, self.scales)
        return sum(int(a.nbytes) for a in arrays)

    @classmethod
    def build(cls, ids: npt.NDArray[np.int32], codes: Codes, scales: Matrix) -> QuantizedLists:
        """Lists clustered anew over the rows ``codes`` x ``scales`` of ``ids``."""
        if len(ids) == 0:
            raise ValueError("cannot index no rows")
        centroids = CoarseIndex.build(dequantized(codes, scales)).centroids
        return cls._grouped(centroids, ids, codes, scales, _assigned(codes, scales, centroids))

    def with_rows(
        self,
        ids: npt.NDArray[np.int32],
        codes: Codes,
        scales: Matrix,
        *,
        dropped: npt.NDArray[np.int32] | None = None,
    ) -> QuantizedLists:
        """These lists with the rows of ``ids`` replaced by (or added as) ``codes`` x
        ``scales``, and the rows of ``dropped`` gone."""
        gone = ids if dropped is None else np.concatenate([ids, dropped])
        keep = ~np.isin(self.ids, gone)
        list_of = np.repeat(np.arange(self.centroids.shape[0]), np.diff(self.offsets))
        return self._grouped(
            self.centroids,
            np.concatenate([self.ids[keep], ids]).astype(np.int32),
            np.concatenate([self.codes[keep], codes]),
            np.concatenate([self.scales[keep], scales]),
            np.concatenate([list_of[keep], _assigned(codes, scales, self.centroids)]),
        )

    @classmethod
    def _grouped(
        cls,
        centroids: Matrix,
        ids: npt.NDArray[np.int32],
        codes: Codes,
        scales: Matrix,
        assign: npt.NDArray[np.intp],
    ) -> QuantizedLists:
        order = np.argsort(assign, kind="stable")
        offsets = np.searchsorted(assign[order], np.arange(centroids.shape[0] + 1))
        return cls(
            centroids,
            np.ascontiguousarray(ids[order], np.int32),
            offsets.astype(np.int64),
            np.ascontiguousarray(codes[order]),
            np.ascontiguousarray(scales[order], np.float32),
        )

    def nearest(self, query: Matrix, k: int) -> tuple[npt.NDArray[np.int32], Matrix]:
        """The ids of up to ``k`` rows of highest dot product with ``query`` among those of
        the closest lists (at least ``max(MIN_PROBE_ROWS, 16 k)`` rows scanned), best first,
        with their approximate dot products."""
        if k <= 0 or len(self) == 0:
            return np.empty(0, np.int32), np.empty(0, np.float32)
        query = np.asarray(query, np.float32)
        if query.shape != (self.dim,):
            raise ValueError(f"a query of shape {query.shape}, the lists' dimension is {self.dim}")
        closeness = np.argsort(-(self.centroids @ query), kind="stable")
        held = np.cumsum(np.diff(self.offsets)[closeness])
        scan = max(MIN_PROBE_ROWS, k * PROBE_ROWS_PER_RESULT)
        taken = closeness[: int(np.searchsorted(held, scan)) + 1]
        blocks = [(int(self.offsets[lst]), int(self.offsets[lst + 1])) for lst in taken]
        ids = np.concatenate([self.ids[a:b] for a, b in blocks])
        sims = np.concatenate([(self.codes[a:b] @ query) * self.scales[a:b] for a, b in blocks])
        top = np.argpartition(-sims, k - 1)[:k] if sims.size > k else np.arange(sims.size)
        top = top[np.argsort(-sims[top], kind="stable")]
        return ids[top], sims[top].astype(np.float32)


def _assigned(codes: Codes, scales: Matrix, centroids: Matrix) -> npt.NDArray[np.intp]:
    """Each row's closest centroid, in chunks to bound the temporary matrix."""
    out = np.empty(codes.shape[0], np.intp)
    for start in range(0, codes.shape[0], 50_000):
        block = dequantized(codes[start : start + 50_000], scales[start : start + 50_000])
        out[start : start + 50_000] = np.argmax(block @ centroids.T, axis=1)
    return out
