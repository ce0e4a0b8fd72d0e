"""The catalog's item vectors between an origin and an edge (``protocol.item_vectors``):
round trips, damaged answers refused naming the field, and the request's two ways."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from pydantic import BaseModel, ValidationError

from protocol.exceptions import MalformedMessage
from protocol.item_vectors import (
    MAX_PAGE,
    ItemVectors,
    ItemVectorsOf,
    ItemVectorsPage,
    decode_item_vectors,
    encode_item_vectors,
)
from relevance.quantized_lists import quantized


def vectors(n: int, dim: int = 16, absent: tuple[str, ...] = ()) -> ItemVectors:
    rng = np.random.default_rng(n)
    unit = rng.normal(size=(n, dim))
    codes, scales = quantized(
        (unit / np.linalg.norm(unit, axis=1, keepdims=True)).astype(np.float32)
    )
    return ItemVectors(4, 1_000, tuple(f"it-{k}" for k in range(n)), codes, scales, absent)


@pytest.mark.parametrize(
    ("n", "absent"), [(0, ()), (1, ()), (50, ("gone-1", "gone-2")), (0, ("x",))]
)
def test_item_vectors_round_trip(n: int, absent: tuple[str, ...]) -> None:
    sent = vectors(n, absent=absent)
    got = decode_item_vectors(encode_item_vectors(sent))
    assert (got.version, got.total, got.item_ids, got.absent) == (4, 1_000, sent.item_ids, absent)
    assert np.array_equal(got.codes, sent.codes)
    assert got.codes.dtype == np.int8
    assert np.array_equal(got.scales, sent.scales)
    assert len(got) == n


def _doc(**change: object) -> bytes:
    doc = msgpack.unpackb(encode_item_vectors(vectors(3)), raw=False)
    doc.update(change)
    return msgpack.packb({k: v for k, v in doc.items() if v is not None}, use_bin_type=True)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"\xc1", "not msgpack"),
        (_doc(v=2), "unknown version"),
        (_doc(version=None), "'version'"),
        (_doc(dim=0), "out of range"),
        (_doc(ids=["a", ""]), "'ids'"),
        (_doc(codes=b"\x01\x02"), "'codes' is 2 bytes"),
        (_doc(scales=np.array([1, 1, -1], "<f4").tobytes()), "not positive"),
        (_doc(scales=np.array([1, 1, np.nan], "<f4").tobytes()), "non-finite"),
        (_doc(absent="x"), "'absent'"),
    ],
)
def test_damaged_item_vectors_are_refused_naming_the_field(raw: bytes, problem: str) -> None:
    with pytest.raises(MalformedMessage, match=problem):
        decode_item_vectors(raw)


@pytest.mark.parametrize(
    ("model", "body"),
    [
        (ItemVectorsPage, {"offset": False}),  # a bool is no offset
        (ItemVectorsPage, {"offset": -1}),
        (ItemVectorsPage, {"limit": MAX_PAGE + 1}),
        (ItemVectorsPage, {"item_ids": ["a"]}),  # the other route's body
        (ItemVectorsOf, {"item_ids": []}),
        (ItemVectorsOf, {"item_ids": ["bad id with spaces"]}),
        (ItemVectorsOf, {"item_ids": ["a"], "offset": 5}),
    ],
)
def test_bad_requests_are_refused(model: type[BaseModel], body: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        model.model_validate(body)


def test_a_page_is_the_first_by_default() -> None:
    assert ItemVectorsPage().offset == 0
    assert ItemVectorsPage().limit == MAX_PAGE
