from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from origin.catalog.item_index import COARSE_MIN_ITEMS, EXACT_SCAN_MAX_ROWS, Filters, ItemIndex
from relevance.coarse_index import CoarseIndex
from tests.unit.catalogs import make_catalog

Matrix = npt.NDArray[np.float32]


@pytest.fixture(scope="module")
def big() -> ItemIndex:
    """30K items: above ``COARSE_MIN_ITEMS``, so queries over many rows probe the IVF."""
    index = make_catalog(30_000, 3, 32).index()
    assert index.coarse is not None
    return index


@pytest.fixture(scope="module")
def small_vectors() -> Matrix:
    rng = np.random.default_rng(4)
    centres = rng.standard_normal((8, 16))
    points = centres[rng.integers(0, 8, size=2_000)] + 0.3 * rng.standard_normal((2_000, 16))
    unit: Matrix = (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)
    return unit


def queries(index: ItemIndex, n: int, seed: int, *, near_items: bool = True) -> list[Matrix]:
    """Queries near catalog items (a user vector lives among the items it learned from), or
    random directions (the hard case for an IVF: between the clusters)."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((n, index.dim))
    if not near_items:
        return [q.astype(np.float32) for q in noise]
    rows = rng.choice(len(index), size=n, replace=False)
    noisy = index.vectors[rows] + 0.3 * noise / np.sqrt(index.dim)
    return [q.astype(np.float32) for q in noisy]


@pytest.mark.parametrize(
    ("filters", "k"),
    [
        (Filters(), 100),
        (Filters(include_out_of_stock=True), 100),
        (Filters(price_min=15.0), 100),
        (Filters(), 300),
    ],
    ids=["in-stock", "everything", "price-filtered", "k-300"],
)
@pytest.mark.parametrize("near_items", [True, False], ids=["near-items", "random-directions"])
def test_ivf_recall_against_exact(
    big: ItemIndex, filters: Filters, k: int, near_items: bool
) -> None:
    mask = big.mask(filters)
    assert np.count_nonzero(mask) > EXACT_SCAN_MAX_ROWS  # the coarse path is taken
    recalls = []
    for query in queries(big, 20, seed=k, near_items=near_items):
        approx, sims = big.nearest(query, k, mask)
        exact, _ = big.nearest(query, k, mask, exact=True)
        assert approx.size == k
        assert mask[approx].all()
        assert np.all(np.diff(sims) <= 0)  # best first
        recalls.append(len(set(approx.tolist()) & set(exact.tolist())) / k)
    assert float(np.mean(recalls)) >= 0.9
    assert min(recalls) >= 0.7


@pytest.mark.parametrize(
    "filters",
    [
        Filters(categories=frozenset({"books"})),  # few rows: an exact scan
        Filters(categories=frozenset({"electronics", "books", "shoes", "garden"})),
        Filters(price_min=10.0, price_max=80.0),
        Filters(exclude=frozenset(f"it-{row:06d}" for row in range(0, 30_000, 3))),
        Filters(categories=frozenset({"garden"}), price_min=10_000.0),  # nothing
    ],
    ids=["one-category", "four-categories", "price-band", "exclude-a-third", "empty"],
)
def test_filtered_queries_return_only_allowed_rows(big: ItemIndex, filters: Filters) -> None:
    mask = big.mask(filters)
    for query in queries(big, 5, seed=1):
        rows, sims = big.nearest(query, 50, mask)
        assert mask[rows].all()
        assert rows.size == min(50, int(np.count_nonzero(mask)))
        assert np.unique(rows).size == rows.size
        assert sims.size == rows.size


def test_exact_flag_matches_brute_force(big: ItemIndex) -> None:
    mask = big.mask(Filters())
    query = queries(big, 1, seed=9)[0]
    rows, _ = big.nearest(query, 25, mask, exact=True)
    allowed = np.flatnonzero(mask)
    sims = big.vectors[allowed] @ (query / np.linalg.norm(query))
    assert rows.tolist() == allowed[np.argsort(-sims, kind="stable")[:25]].tolist()


@pytest.mark.parametrize(("k", "shape"), [(0, (32,)), (-1, (32,))], ids=["k-zero", "k-negative"])
def test_nearest_empty_for_no_k(big: ItemIndex, k: int, shape: tuple[int, ...]) -> None:
    rows, sims = big.nearest(np.ones(shape, np.float32), k, big.mask(Filters()))
    assert rows.size == sims.size == 0


def test_nearest_rejects_a_wrong_dimension(big: ItemIndex) -> None:
    with pytest.raises(ValueError, match="dimension"):
        big.nearest(np.ones(16, np.float32), 5, big.mask(Filters()))


def test_small_catalogs_have_no_coarse_index() -> None:
    index = make_catalog(COARSE_MIN_ITEMS // 10, 1, 16).index()
    assert index.coarse is None


@pytest.mark.parametrize(
    "filters",
    [
        Filters(),
        Filters(include_out_of_stock=True),
        Filters(categories=frozenset({"books"})),
        Filters(price_max=12.0),
        Filters(exclude=frozenset(f"it-{row:06d}" for row in range(30_000))),  # nothing
    ],
    ids=["default", "everything", "category", "cheap", "nothing"],
)
@pytest.mark.parametrize("k", [0, 1, 10, 300, 5_000])
def test_popular_and_fresh_honour_the_mask(big: ItemIndex, filters: Filters, k: int) -> None:
    mask = big.mask(filters)
    allowed = int(np.count_nonzero(mask))
    for method, order in ((big.popular, big.trending_order), (big.fresh, big.fresh_order)):
        rows = method(k, mask)
        assert rows.size == min(k, allowed)
        assert mask[rows].all()
        # the first k allowed rows of the order, in that order
        assert rows.tolist() == order[mask[order]][:k].tolist()
    popular = big.popular(k, mask)
    assert np.all(np.diff(big.trending[popular]) <= 0)
    fresh = big.fresh(k, mask)
    assert np.all(np.diff(big.freshness[fresh]) <= 0)


def test_build_is_deterministic_and_partitions_the_rows(small_vectors: Matrix) -> None:
    a = CoarseIndex.build(small_vectors, seed=3)
    b = CoarseIndex.build(small_vectors, seed=3)
    assert np.array_equal(a.centroids, b.centroids)
    assert np.array_equal(a.order, b.order)
    n = small_vectors.shape[0]
    assert a.lists == max(1, round(np.sqrt(n) / 2))  # about 2 sqrt(n) rows per list
    assert sorted(a.order.tolist()) == list(range(n))
    assert a.offsets[0] == 0
    assert a.offsets[-1] == n
    assert np.all(np.diff(a.offsets) >= 0)
    assert np.allclose(np.linalg.norm(a.centroids, axis=1), 1.0, atol=1e-5)
    # every row sits in the list of its closest centroid
    closest = np.argmax(small_vectors @ a.centroids.T, axis=1)
    for lst in range(a.lists):
        members = a.order[a.offsets[lst] : a.offsets[lst + 1]]
        assert (closest[members] == lst).all()


@pytest.mark.parametrize(
    ("n", "lists", "expected"),
    [(1, None, 1), (5, None, 1), (100, None, 5), (10, 50, 10), (100, 7, 7), (100, 0, 1)],
    ids=["one-row", "five-rows", "hundred", "lists-capped-at-n", "explicit", "zero-lists"],
)
def test_build_list_count(small_vectors: Matrix, n: int, lists: int | None, expected: int) -> None:
    index = CoarseIndex.build(small_vectors[:n], lists=lists)
    assert index.lists == expected
    assert sorted(index.order.tolist()) == list(range(n))


def test_build_rejects_an_empty_matrix() -> None:
    with pytest.raises(ValueError, match="empty"):
        CoarseIndex.build(np.empty((0, 8), np.float32))


@pytest.mark.parametrize(
    ("allowed_share", "min_scan"),
    [(1.0, 100), (1.0, 2_000), (0.1, 100), (0.1, 5_000), (0.0, 10)],
    ids=["all-small-scan", "all-whole", "tenth", "tenth-more-than-allowed", "nothing-allowed"],
)
def test_search(small_vectors: Matrix, allowed_share: float, min_scan: int) -> None:
    index = CoarseIndex.build(small_vectors, seed=0)
    rng = np.random.default_rng(2)
    mask = rng.random(small_vectors.shape[0]) < allowed_share
    query = small_vectors[7]
    rows, sims = index.search(query, mask, min_scan)
    np.testing.assert_allclose(sims, small_vectors[rows] @ query, rtol=1e-5, atol=1e-6)
    allowed = int(np.count_nonzero(mask))
    assert mask[rows].all()
    assert np.unique(rows).size == rows.size
    assert rows.size >= min(min_scan, allowed)
    if allowed <= min_scan:
        assert rows.size == allowed
    if rows.size:
        # the query's own list is scanned first
        closest = int(np.argmax(index.centroids @ query))
        own = index.order[index.offsets[closest] : index.offsets[closest + 1]]
        own_allowed = own[mask[own]]
        assert set(own_allowed.tolist()) <= set(rows.tolist())
