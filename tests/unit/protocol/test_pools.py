from __future__ import annotations

import math
from typing import Any

import msgpack
import numpy as np
import numpy.typing as npt
import pytest

from protocol.exceptions import MalformedMessage
from protocol.pools import (
    STORED_COLUMNS,
    Pool,
    decode_pool,
    decode_pool_fill,
    encode_pool,
    encode_pool_fill,
)


def stored(n: int) -> npt.NDArray[np.float64]:
    """Stored rows: the cell's alpha, beta and last change, then all contexts' (the first
    item has none stored in its cell: zeros)."""
    rows = np.tile([2.0, 30.0, 1.7e12, 5.0, 90.0, 1.7e12], (n, 1))
    if n:
        rows[0, :3] = 0.0
    return rows


def pool(n: int = 3, dim: int = 4, *, with_stored: bool = True) -> Pool:
    rng = np.random.default_rng(n)
    vectors = rng.normal(size=(n, dim))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return Pool(
        context="mobile_evening",
        model_version="nn-1",
        built_ms=1_767_225_600_000,
        item_ids=tuple(f"it-{k}" for k in range(n)),
        sources=tuple(("trending", "content", "exploration")[k % 3] for k in range(n)),
        categories=tuple(("books", "toys-games")[k % 2] for k in range(n)),
        metadata=tuple(
            b'{"title":"T%d","category":"Books","price":1.0,"image_url":"u"}' % k for k in range(n)
        ),
        vectors=vectors.astype(np.float16),
        alpha=rng.uniform(1, 9, n).astype(np.float32),
        beta=rng.uniform(10, 90, n).astype(np.float32),
        value=np.ones(n, np.float32),
        stored=stored(n) if with_stored else None,
    )


@pytest.mark.parametrize(("n", "dim"), [(0, 4), (1, 1), (3, 4), (300, 128)])
def test_pools_round_trip(n: int, dim: int) -> None:
    p = pool(n, dim)
    back = decode_pool(encode_pool(p))
    for name in (
        "context",
        "model_version",
        "built_ms",
        "item_ids",
        "sources",
        "categories",
        "metadata",
    ):
        assert getattr(back, name) == getattr(p, name), name
    for name in ("vectors", "alpha", "beta", "value", "stored"):
        assert np.array_equal(getattr(back, name), getattr(p, name)), name
    assert back.dim == dim
    assert len(back) == n


def test_a_pool_without_its_stored_posteriors_is_read_as_filled() -> None:
    # an origin that predates them sends none
    back = decode_pool(encode_pool(pool(3, 4, with_stored=False)))
    assert back.stored is None
    assert back.alpha.shape == (3,)


def test_a_pool_of_300_at_dim_128_is_compact() -> None:
    raw = encode_pool(pool(300, 128))
    # the vectors (300 * 128 * 2 bytes) dominate, then the stored rows (300 * 48): about
    # 115 KB in all
    assert len(raw) < 125_000


def doc(**changes: Any) -> bytes:
    d: dict[str, Any] = msgpack.unpackb(encode_pool(pool()), raw=False)
    for name, value in changes.items():
        if value is None:
            del d[name]
        else:
            d[name] = value
    return msgpack.packb(d, use_bin_type=True)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"\xc1", "not msgpack"),
        (msgpack.packb([1]), "not a map"),
        (doc(v=2), "unknown version 2"),
        (doc(context=None), "'context' is not of type str"),
        (doc(built_ms="1"), "'built_ms' is not of type int"),
        (doc(dim=0), "'dim' is not positive"),
        (doc(dim=True), "'dim' is not of type int"),
        (doc(ids=["it-0", "", "it-2"]), "'ids' holds something not a non-empty string"),
        (doc(sources=["trending", "content"]), "'sources' has 2 values for 3 items"),
        (doc(sources=["trending", "content", "magic"]), "'magic', not a source"),
        (doc(metadata=[b"{}", b"{}"]), "'metadata' is not 3 byte strings"),
        (doc(vectors=b"\x00" * 10), "'vectors' is 10 bytes, not 24"),
        (
            doc(alpha=np.array([1, 0, 1], "<f4").tobytes()),
            "'alpha' holds a number that is not positive",
        ),
        (doc(beta=np.array([1, math.nan, 1], "<f4").tobytes()), "'beta' holds a non-finite"),
        (
            doc(value=np.array([1, 1, -1], "<f4").tobytes()),
            "'value' holds a number that is not positive",
        ),
        (doc(stored=b"\x00" * 16), f"'stored' is 16 bytes, not {3 * STORED_COLUMNS * 8}"),
        (doc(stored=np.full(3 * STORED_COLUMNS, -1.0, "<f8").tobytes()), "negative"),
        (doc(stored=np.full(3 * STORED_COLUMNS, math.inf, "<f8").tobytes()), "non-finite"),
    ],
)
def test_damaged_pools_are_refused_naming_the_field(raw: bytes, problem: str) -> None:
    with pytest.raises(MalformedMessage, match=problem):
        decode_pool(raw)


def test_a_pool_without_some_items() -> None:
    p = pool(5, 4)
    kept = p.without({"it-1", "it-3", "not-there"})
    assert kept.item_ids == ("it-0", "it-2", "it-4")
    assert kept.sources == (p.sources[0], p.sources[2], p.sources[4])
    assert np.array_equal(kept.vectors, p.vectors[[0, 2, 4]])
    assert np.array_equal(kept.alpha, p.alpha[[0, 2, 4]])
    assert kept.stored is not None
    assert p.stored is not None
    assert np.array_equal(kept.stored, p.stored[[0, 2, 4]])
    assert p.without({"nothing"}) is p
    assert len(p.without(set(p.item_ids))) == 0


ANSWER = b'{"request_id":"r","user_id":"u","items":[],"metadata":{}}'


@pytest.mark.parametrize("n", [0, 1, 3])
def test_pool_fills_round_trip(n: int) -> None:
    p = pool(n)
    answer, back = decode_pool_fill(encode_pool_fill(ANSWER, p))
    assert answer == ANSWER
    assert encode_pool(back) == encode_pool(p)


def fill(**changes: Any) -> bytes:
    d: dict[str, Any] = {"answer": ANSWER, "pool": encode_pool(pool())}
    for name, value in changes.items():
        if value is None:
            del d[name]
        else:
            d[name] = value
    return msgpack.packb(d, use_bin_type=True)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"\xc1", "pool fill: not msgpack"),
        (b"", "pool fill: not msgpack"),
        (msgpack.packb(["answer", "pool"]), "pool fill: not a map but list"),
        (fill(answer=None), "pool fill: field 'answer' is not a non-empty byte string"),
        (fill(answer="{}"), "pool fill: field 'answer' is not a non-empty byte string"),
        (fill(answer=b""), "pool fill: field 'answer' is not a non-empty byte string"),
        (fill(pool=None), "pool fill: field 'pool' is not a non-empty byte string"),
        (fill(pool=[1]), "pool fill: field 'pool' is not a non-empty byte string"),
        (fill(extra=b"x"), "pool fill: unknown field 'extra'"),
        (fill(pool=doc(ids=["a"])), "pool: field 'sources' has 3 values for 1 items"),
        (fill(pool=b"\x93"), "pool: not msgpack"),
    ],
)
def test_damaged_pool_fills_are_refused_naming_the_field(raw: bytes, problem: str) -> None:
    with pytest.raises(MalformedMessage, match=problem):
        decode_pool_fill(raw)
