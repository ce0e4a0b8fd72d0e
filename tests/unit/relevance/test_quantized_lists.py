"""The edge's int8 lists (``relevance.quantized_lists``): codes, recall against the exact
scan, rows replaced, added and dropped."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from relevance.quantized_lists import QuantizedLists, dequantized, quantized

DIM = 32


def clustered(n: int, seed: int) -> npt.NDArray[np.float32]:
    """Unit vectors around 40 directions, as a shop's categories and styles."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(40, DIM))
    vectors = centres[rng.integers(0, 40, n)] + 0.6 * rng.normal(size=(n, DIM))
    out: npt.NDArray[np.float32] = (
        vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    ).astype(np.float32)
    return out


def lists_of(vectors: npt.NDArray[np.float32]) -> QuantizedLists:
    codes, scales = quantized(vectors)
    return QuantizedLists.build(np.arange(len(vectors), dtype=np.int32), codes, scales)


@pytest.mark.parametrize(
    "row",
    [[1.0, 0.0, 0.0], [0.5, -0.5, 0.25], [0.0, 0.0, 0.0], [-1.0, 1.0, 1e-4]],
    ids=["axis", "mixed", "zero", "tiny"],
)
def test_codes_round_trip_within_half_a_step(row: list[float]) -> None:
    vectors = np.array([row], np.float32)
    codes, scales = quantized(vectors)
    assert codes.dtype == np.int8
    assert np.all(np.abs(codes) <= 127)
    assert np.allclose(dequantized(codes, scales), vectors, atol=float(scales[0]) / 2 + 1e-9)


@pytest.mark.parametrize(("n", "k"), [(3_000, 10), (20_000, 175), (20_000, 1)])
def test_recall_against_the_exact_scan(n: int, k: int) -> None:
    vectors = clustered(n, seed=n)
    lists = lists_of(vectors)
    recalls = []
    for query in clustered(20, seed=7):
        ids, sims = lists.nearest(query, k)
        assert ids.size == k
        assert np.unique(ids).size == k
        assert np.all(np.diff(sims) <= 1e-6)  # best first
        exact = np.argsort(-(vectors @ query), kind="stable")[:k]
        recalls.append(np.intersect1d(ids, exact).size / k)
    assert float(np.mean(recalls)) >= 0.9


def test_rows_replaced_added_and_dropped() -> None:
    vectors = clustered(2_000, seed=3)
    lists = lists_of(vectors)
    query = vectors[5]
    # Row 5 moved far away, row 9 dropped, a new row 2000 put where row 5 was.
    moved = -vectors[5:6]
    codes, scales = quantized(np.concatenate([moved, vectors[5:6]]))
    changed = lists.with_rows(
        np.array([5, 2_000], np.int32), codes, scales, dropped=np.array([9], np.int32)
    )
    assert len(changed) == len(lists)
    assert changed.nbytes == lists.nbytes
    ids, _ = changed.nearest(query, 5)
    assert ids[0] == 2_000
    assert 5 not in ids.tolist()
    assert 9 not in changed.ids.tolist()
    assert sorted(changed.ids.tolist()) == sorted(set(range(2_001)) - {9})
    # The lists' offsets still cover every row once.
    assert changed.offsets[0] == 0
    assert changed.offsets[-1] == len(changed)


def test_nearest_of_nothing_and_of_a_wrong_shape() -> None:
    lists = lists_of(clustered(100, seed=1))
    assert lists.nearest(np.ones(DIM, np.float32), 0)[0].size == 0
    assert lists.nearest(np.ones(DIM, np.float32), 500)[0].size == 100
    with pytest.raises(ValueError, match="dimension"):
        lists.nearest(np.ones(DIM + 1, np.float32), 3)
    with pytest.raises(ValueError, match="no rows"):
        QuantizedLists.build(
            np.empty(0, np.int32), np.empty((0, DIM), np.int8), np.empty(0, np.float32)
        )
