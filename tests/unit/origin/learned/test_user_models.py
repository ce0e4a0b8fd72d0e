from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from origin.learned.user_models import (
    DAY_S,
    WINDOW,
    UserRecord,
    decode_record,
    encode_record,
    observation_hash,
    record_version,
)
from protocol.exceptions import MalformedMessage
from relevance.user_model import UserModel

DIM = 8
HEADER = 22  # version u32, updated u64, dimension u16, flags u8, window u8, day u32, count u16


def model(dim: int = DIM, seed: int = 0) -> UserModel:
    rng = np.random.default_rng(seed)
    return UserModel(
        rng.normal(0.0, 0.3, dim).astype(np.float32),
        rng.uniform(1e-4, 0.2, dim).astype(np.float32),
    )


def assert_same(back: UserRecord, record: UserRecord) -> None:
    assert (back.version, back.updated_ms, back.window, back.day_start_s, back.day_count) == (
        record.version,
        record.updated_ms,
        record.window,
        record.day_start_s,
        record.day_count,
    )
    if record.model is None:
        assert back.model is None
        return
    assert back.model is not None
    assert back.model.mean.dtype == np.float32
    assert back.model.var.dtype == np.float32
    # float16 on the wire: 11 significant bits
    np.testing.assert_allclose(back.model.mean, record.model.mean, rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(back.model.var, record.model.var, rtol=1e-3)


@pytest.mark.parametrize(
    "record",
    [
        UserRecord(),
        UserRecord(
            version=3, updated_ms=1_767_225_600_000, window=(1, 2, 3), day_start_s=9, day_count=4
        ),
        UserRecord(version=1, updated_ms=5, model=model()),
        UserRecord(
            version=2**32 - 1,
            updated_ms=2**64 - 1,
            model=model(seed=1),
            window=tuple(range(2**64 - WINDOW, 2**64)),
            day_start_s=2**32 - 1,
            day_count=0xFFFF,
        ),
        UserRecord(model=UserModel.prior(DIM)),
    ],
    ids=["empty", "no-model", "model", "extremes", "prior"],
)
def test_records_round_trip(record: UserRecord) -> None:
    assert_same(decode_record(encode_record(record, DIM), DIM), record)


@pytest.mark.parametrize("raw", [None, b""], ids=["missing", "empty"])
def test_a_user_never_seen_is_the_empty_record(raw: bytes | None) -> None:
    assert decode_record(raw, DIM) == UserRecord()


@pytest.mark.parametrize(
    ("dim", "window", "with_model", "size"),
    [
        (128, WINDOW, True, HEADER + 4 * 128 + 8 * WINDOW),
        (128, 0, True, HEADER + 4 * 128),
        (512, WINDOW, True, HEADER + 4 * 512 + 8 * WINDOW),
        (128, 3, False, HEADER + 8 * 3),
    ],
    ids=["default-full", "no-window", "512-full", "no-model"],
)
def test_the_layout_is_compact(dim: int, window: int, with_model: bool, size: int) -> None:
    record = UserRecord(7, 1, model(dim) if with_model else None, tuple(range(window)))
    raw = encode_record(record, dim)
    assert len(raw) == size
    assert len(raw) < 5 * 1024  # seed 000's bound on per-user state


def test_the_header_is_little_endian_at_fixed_offsets() -> None:
    raw = encode_record(
        UserRecord(version=5, updated_ms=6, model=model(), window=(9,), day_start_s=7, day_count=8),
        DIM,
    )
    assert struct.unpack_from("<IQHBBIH", raw) == (5, 6, DIM, 1, 1, 7, 8)
    mean = np.frombuffer(raw[HEADER : HEADER + 2 * DIM], "<f2")
    assert np.array_equal(mean, model().mean.astype(np.float16))
    assert raw[-8:] == (9).to_bytes(8, "little")


def test_the_window_keeps_the_last_ones_on_encode() -> None:
    record = UserRecord(window=tuple(range(WINDOW + 10)))
    back = decode_record(encode_record(record, DIM), DIM)
    assert back.window == tuple(range(10, WINDOW + 10))


def test_a_day_count_past_its_field_is_capped() -> None:
    back = decode_record(encode_record(UserRecord(day_count=70_000), DIM), DIM)
    assert back.day_count == 0xFFFF


def test_a_record_of_another_dimension_keeps_version_and_window_not_model() -> None:
    record = UserRecord(4, 9, model(), (5, 6), day_start_s=100, day_count=2)
    back = decode_record(encode_record(record, DIM), DIM * 2)
    assert back.model is None
    assert (back.version, back.updated_ms, back.window) == (4, 9, (5, 6))
    assert (back.day_start_s, back.day_count) == (100, 2)


def damaged_model(mean_value: float, var_value: float) -> bytes:
    raw = bytearray(encode_record(UserRecord(version=1, model=model(), window=(3,)), DIM))
    raw[HEADER : HEADER + 2] = np.array([mean_value], "<f2").tobytes()
    raw[HEADER + 2 * DIM : HEADER + 2 * DIM + 2] = np.array([var_value], "<f2").tobytes()
    return bytes(raw)


FULL = encode_record(UserRecord(version=2, model=model(), window=(1, 2)), DIM)


@pytest.mark.parametrize(
    "raw",
    [
        b"\x01\x02",
        FULL[: HEADER - 1],
        FULL[: HEADER + 4 * DIM - 1],  # the model cut short
        FULL[:-3],  # the window cut short
        FULL + b"\x00",  # more than the header says
        FULL[:-8],  # one hash fewer than the header says
        damaged_model(np.nan, 0.1),
        damaged_model(0.1, np.inf),
        damaged_model(0.1, 0.0),
        damaged_model(0.1, -0.1),
    ],
    ids=[
        "two-bytes",
        "short-header",
        "truncated-model",
        "truncated-window",
        "trailing-byte",
        "missing-hash",
        "nan-mean",
        "infinite-var",
        "zero-var",
        "negative-var",
    ],
)
def test_damaged_records_are_malformed(raw: bytes) -> None:
    with pytest.raises(MalformedMessage):
        decode_record(raw, DIM)


def test_a_damaged_model_of_another_dimension_is_not_read() -> None:
    # only the configured dimension's model is parsed; the rest is still checked for length
    back = decode_record(damaged_model(np.nan, 0.0), DIM * 2)
    assert (back.version, back.model, back.window) == (1, None, (3,))
    with pytest.raises(MalformedMessage):
        decode_record(FULL[:-3], DIM * 2)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, 0),
        (b"", 0),
        (b"\x01", 0),
        (encode_record(UserRecord(version=12), DIM), 12),
        (FULL, 2),
        (encode_record(UserRecord(version=2**32 - 1, model=model()), DIM)[:HEADER], 2**32 - 1),
    ],
    ids=["missing", "empty", "too-short", "stored", "with-model", "header-alone"],
)
def test_record_version(raw: bytes | None, expected: int) -> None:
    assert record_version(raw) == expected


@pytest.mark.parametrize(
    ("observation_id", "expected"),
    [
        ("ix-1", 5641944549921975639),
        ("close:req-1", 6155350401684243487),
        ("", 13020603013274838756),
    ],
)
def test_observation_hashes_are_stable(observation_id: str, expected: int) -> None:
    # pinned: a changed digest would make every stored window forget what it applied
    assert observation_hash(observation_id) == expected


def test_observation_hashes_are_distinct_and_64_bit() -> None:
    hashes = {observation_hash(f"ix-{i}") for i in range(10_000)}
    assert len(hashes) == 10_000
    assert all(0 <= h < 2**64 for h in hashes)


def test_applied_reads_the_window() -> None:
    record = UserRecord(window=(observation_hash("a"), observation_hash("b")))
    assert record.applied(observation_hash("a"))
    assert not record.applied(observation_hash("c"))


def test_the_window_keeps_the_last_fifty() -> None:
    record = UserRecord(window=tuple(range(WINDOW)))
    window = record.with_applied([100, 101])
    assert len(window) == WINDOW
    assert window[-2:] == (100, 101)
    assert window[0] == 2
    assert UserRecord(window=(1,)).with_applied([2, 3]) == (1, 2, 3)
    assert UserRecord().with_applied([]) == ()


@pytest.mark.parametrize(
    ("day_start_s", "day_count", "now_s", "today", "after_two"),
    [
        (1000, 5, 1000 + 3600, 5, (1000, 7)),
        (1000, 5, 1000 + DAY_S - 1, 5, (1000, 7)),
        (1000, 5, 1000 + DAY_S, 0, (1000 + DAY_S, 2)),
        (0, 0, 50_000_000, 0, (50_000_000, 2)),
        (1000, 0xFFFF, 2000, 0xFFFF, (1000, 0xFFFF)),
    ],
    ids=["same-day", "last-second", "next-day", "never", "count-capped"],
)
def test_activity_days(
    day_start_s: int, day_count: int, now_s: int, today: int, after_two: tuple[int, int]
) -> None:
    record = UserRecord(day_start_s=day_start_s, day_count=day_count)
    assert record.interactions_today(now_s) == today
    assert record.day_after(now_s, 2) == after_two


_halves = st.floats(min_value=-60_000, max_value=60_000, width=16, allow_nan=False)
_positive_halves = st.floats(
    min_value=0.0, exclude_min=True, max_value=60_000, width=16, allow_nan=False
)


@settings(max_examples=200, deadline=None)
@given(
    version=st.integers(0, 2**32 - 1),
    updated_ms=st.integers(0, 2**64 - 1),
    window=st.lists(st.integers(0, 2**64 - 1), max_size=WINDOW).map(tuple),
    day_start_s=st.integers(0, 2**32 - 1),
    day_count=st.integers(0, 0xFFFF),
    values=st.none()
    | st.tuples(
        st.lists(_halves, min_size=DIM, max_size=DIM),
        st.lists(_positive_halves, min_size=DIM, max_size=DIM),
    ),
)
def test_any_record_round_trips(
    *,
    version: int,
    updated_ms: int,
    window: tuple[int, ...],
    day_start_s: int,
    day_count: int,
    values: tuple[list[float], list[float]] | None,
) -> None:
    m = (
        None
        if values is None
        else UserModel(np.array(values[0], np.float32), np.array(values[1], np.float32))
    )
    record = UserRecord(version, updated_ms, m, window, day_start_s, day_count)
    back = decode_record(encode_record(record, DIM), DIM)
    assert (back.version, back.updated_ms, back.window) == (version, updated_ms, window)
    assert (back.day_start_s, back.day_count) == (day_start_s, day_count)
    if m is None:
        assert back.model is None
    else:
        # values representable in float16 come back exactly
        assert back.model is not None
        assert np.array_equal(back.model.mean, m.mean)
        assert np.array_equal(back.model.var, m.var)
