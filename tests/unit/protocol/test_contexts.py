"""The context log's record (``protocol.contexts``): its round trip, its strict decoding
(each malformed field refused by name) and which candidate rows it keeps."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgpack
import numpy as np
import pytest

from protocol.contexts import (
    CONTEXT_VERSION,
    KEPT,
    RankedContext,
    decode_context,
    encode_context,
    kept_rows,
)
from protocol.exceptions import MalformedMessage
from relevance.slate import TIE


def f32(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


def record(user: bytes | None = b"\x00\x3c" * 8) -> RankedContext:
    return RankedContext(
        request_id="r-1",
        user_id="u-1",
        at_ms=1_767_225_600_000,
        count=2,
        prior_var=0.25,
        user=user,
        retrieved=40,
        items=("it-1", "it-2", "it-3"),
        alpha=f32(1.0, 2.5, 30.0),
        beta=f32(9.0, 100.0, 0.5),
        shift=f32(0.0, -0.25, 0.5),
        emotion=f32(0.125, 0.0, -0.3),
    )


def fields(c: RankedContext) -> dict[str, Any]:
    return {
        name: getattr(c, name).tolist()
        if isinstance(getattr(c, name), np.ndarray)
        else getattr(c, name)
        for name in c.__dataclass_fields__
    }


@pytest.mark.parametrize("user", [b"\x00\x3c" * 8, None], ids=["user", "segment-wide"])
def test_round_trip(user: bytes | None) -> None:
    original = record(user)
    decoded = decode_context(encode_context(original))
    assert fields(decoded) == fields(original)
    assert all(getattr(decoded, a).dtype == np.float32 for a in ("alpha", "beta"))


def test_a_models_factor_round_trips() -> None:
    factor = np.arange(8, dtype=np.float32).reshape(4, 2) / 10  # the user's 16 bytes: dim 4
    original = dataclasses.replace(record(), factor=factor)
    decoded = decode_context(encode_context(original))
    assert fields(decoded) == fields(original)
    assert decoded.factor is not None
    assert decoded.factor.shape == (4, 2)


def test_an_empty_record_round_trips() -> None:
    empty = RankedContext("r", "u", 0, 0, 1.0, None, 0, (), f32(), f32(), f32(), f32())
    assert fields(decode_context(encode_context(empty))) == fields(empty)


def doc(**change: Any) -> bytes:
    """The wire form of ``record()`` with fields changed (a value of ``...`` drops one)."""
    d: dict[str, Any] = msgpack.unpackb(encode_context(record()), raw=False)
    d.update(change)
    packed: bytes = msgpack.packb({k: v for k, v in d.items() if v is not ...}, use_bin_type=True)
    return packed


def floats(*values: float) -> bytes:
    return np.array(values, "<f4").tobytes()


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (doc(v=CONTEXT_VERSION + 1), "version"),
        (doc(v=...), "version"),
        (doc(request_id=...), "request_id"),
        (doc(request_id=""), "request_id"),
        (doc(user_id=...), "user_id"),
        (doc(user_id=7), "user_id"),
        (doc(at_ms=-1), "at_ms"),
        (doc(at_ms=1.5), "at_ms"),
        (doc(count=True), "count"),
        (doc(retrieved=...), "retrieved"),
        (doc(prior_var=0.0), "prior_var"),
        (doc(prior_var=1), "prior_var"),
        (doc(prior_var=float("nan")), "prior_var"),
        (doc(user="abc"), "user"),
        (doc(user=[1, 2]), "user"),
        (doc(items="it-1"), "items"),
        (doc(items=["it-1", "", "it-3"]), "items"),
        (doc(items=["it-1", 2, "it-3"]), "items"),
        (doc(alpha=floats(1.0, 2.0)), "alpha"),
        (doc(beta=...), "beta"),
        (doc(shift=floats(0, 0, 0, 0)), "shift"),
        (doc(emotion=[0.0, 0.0, 0.0]), "emotion"),
        (doc(alpha=floats(1.0, float("inf"), 3.0)), "alpha"),
        (doc(shift=floats(0.0, float("nan"), 0.0)), "shift"),
        (doc(emotion=floats(0.0, 0.0, float("-inf"))), "emotion"),
        (doc(alpha=floats(1.0, 0.0, 3.0)), "Beta posterior"),
        (doc(beta=floats(1.0, 2.0, -3.0)), "Beta posterior"),
        (doc(rank=1, factor=floats(0, 0, 0, 0), user=None), "without a user model"),
        (doc(rank=0, factor=b""), "'rank'"),
        (doc(rank=True, factor=floats(0, 0, 0, 0)), "'rank'"),
        (doc(factor=floats(0, 0, 0, 0)), "'rank'"),
        (doc(rank=1, factor=floats(0, 0, 0)), "'factor' is not 4 x 1"),
        (doc(rank=2, factor=floats(0, 0, 0, 0)), "'factor' is not 4 x 2"),
        (doc(rank=1), "'factor' is not 4 x 1"),
        (doc(rank=1, factor=floats(0, float("nan"), 0, 0)), "'factor' has a non-finite"),
    ],
)
def test_a_malformed_record_is_refused_by_its_field(raw: bytes, field: str) -> None:
    with pytest.raises(MalformedMessage, match=field):
        decode_context(raw)


@pytest.mark.parametrize(
    ("raw", "message"),
    [(b"\xc1", "not msgpack"), (msgpack.packb([1, 2]), "not a map")],
)
def test_what_is_not_a_record_is_refused(raw: bytes, message: str) -> None:
    with pytest.raises(MalformedMessage, match=message):
        decode_context(raw)


@pytest.mark.parametrize(
    ("optimistic", "rate", "count", "kept"),
    [
        # fewer than KEPT: every row, in ascending order
        ([0.3, 0.1, 0.2], [0.1, 0.2, 0.3], 2, [0, 1, 2]),
        ([], [], 5, []),
    ],
)
def test_a_short_candidate_list_is_kept_whole(
    optimistic: list[float], rate: list[float], count: int, kept: list[int]
) -> None:
    rows = kept_rows(np.array(optimistic), np.array(rate), count, tie=TIE)
    assert rows.tolist() == kept
    assert rows.dtype == np.intp


@pytest.mark.parametrize("count", [0, 1, 10, KEPT + 50])
def test_kept_are_the_best_by_optimistic_score_and_the_most_popular(count: int) -> None:
    n = KEPT + 300
    rng = np.random.default_rng(count)
    optimistic = rng.permutation(n).astype(np.float64)  # row r is the (n - optimistic[r])th
    rate = rng.permutation(n).astype(np.float64) / n
    rows = kept_rows(optimistic, rate, count, tie=TIE)
    best = {r for r in range(n) if optimistic[r] >= n - KEPT}
    popular = {r for r in range(n) if rate[r] * n >= n - count}
    assert len(best) == KEPT
    assert len(popular) == min(count, n)
    assert rows.tolist() == sorted(best | popular)


@pytest.mark.parametrize(
    ("above", "tied", "kept"),
    [
        (0, KEPT + 100, KEPT + 100),  # a cold start: every candidate at the prior
        (KEPT - 50, 100, KEPT + 50),  # a tie across the KEPT-th place
        (KEPT - 50, 50, KEPT),  # a tie that ends at the KEPT-th place
    ],
)
def test_candidates_tied_with_the_last_kept_are_all_kept(above: int, tied: int, kept: int) -> None:
    """The ranker's pre-selection takes ties whole: a record keeps every candidate it took,
    those a rounding error away from the tie too."""
    n = KEPT + 100
    optimistic = np.zeros(n)
    optimistic[:above] = 1.0
    optimistic[above : above + tied] = 0.5 + np.linspace(-TIE / 2, TIE / 2, tied)
    if above + tied < n:
        optimistic[above + tied :] = -np.arange(1.0, n - above - tied + 1)
    rows = kept_rows(optimistic, np.zeros(n), 3, tie=TIE)
    assert rows.tolist() == list(range(kept))
