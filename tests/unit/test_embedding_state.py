from __future__ import annotations

import numpy as np
import pytest

from origin.embedding_state import (
    WINDOW,
    WorkerState,
    decode_state,
    encode_state,
    interaction_hash,
    state_version,
)
from protocol.exceptions import MalformedMessage

DIM = 8


@pytest.mark.parametrize(
    "state",
    [
        WorkerState(),
        WorkerState(
            version=3, updated_ms=1_767_225_600_000, window=(1, 2, 3), day_start_s=9, day_count=4
        ),
        WorkerState(
            version=2**32 - 1,
            updated_ms=2**63,
            momentum=np.linspace(-0.5, 0.5, DIM, dtype=np.float32),
            window=tuple(range(WINDOW)),
        ),
    ],
    ids=["empty", "no-momentum", "full"],
)
def test_state_round_trips(state: WorkerState) -> None:
    back = decode_state(encode_state(state, DIM), DIM)
    assert (back.version, back.updated_ms, back.window, back.day_start_s, back.day_count) == (
        state.version,
        state.updated_ms,
        state.window,
        state.day_start_s,
        state.day_count,
    )
    if state.momentum is None:
        assert back.momentum is None
    else:
        assert back.momentum is not None
        np.testing.assert_allclose(back.momentum, state.momentum, atol=1e-3)


@pytest.mark.parametrize(
    ("dim", "expected_bytes"),
    [(128, 22 + 2 * 128 + 8 * WINDOW), (512, 22 + 2 * 512 + 8 * WINDOW)],
    ids=["128", "512"],
)
def test_a_full_state_is_compact(dim: int, expected_bytes: int) -> None:
    state = WorkerState(7, 1, np.zeros(dim, np.float32), tuple(range(WINDOW)))
    assert len(encode_state(state, dim)) == expected_bytes


def test_the_window_keeps_the_last_fifty() -> None:
    state = WorkerState(window=tuple(range(WINDOW)))
    window = state.with_applied([100, 101])
    assert len(window) == WINDOW
    assert window[-2:] == (100, 101)
    assert window[0] == 2


def test_a_state_of_another_dimension_keeps_version_and_window_not_momentum() -> None:
    raw = encode_state(WorkerState(4, 9, np.ones(DIM, np.float32), (5,)), DIM)
    back = decode_state(raw, DIM * 2)
    assert (back.version, back.window, back.momentum) == (4, (5,), None)


@pytest.mark.parametrize(
    "raw",
    [b"\x01\x02", encode_state(WorkerState(window=(1, 2)), DIM)[:-3]],
    ids=["shorter-than-header", "truncated-window"],
)
def test_damaged_states_are_malformed(raw: bytes) -> None:
    with pytest.raises(MalformedMessage):
        decode_state(raw, DIM)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, 0), (b"", 0), (encode_state(WorkerState(version=12), DIM), 12), (b"\x01", 0)],
    ids=["missing", "empty", "stored", "too-short"],
)
def test_state_version(raw: bytes | None, expected: int) -> None:
    assert state_version(raw) == expected


def test_interaction_hashes_are_stable_and_distinct() -> None:
    assert interaction_hash("ix-1") == interaction_hash("ix-1")
    assert interaction_hash("ix-1") != interaction_hash("ix-2")
    assert 0 <= interaction_hash("anything") < 2**64


@pytest.mark.parametrize(
    ("day_start_s", "day_count", "now_s", "today", "after_two"),
    [
        (1000, 5, 1000 + 3600, 5, (1000, 7)),
        (1000, 5, 1000 + 86_399, 5, (1000, 7)),
        (1000, 5, 1000 + 86_400, 0, (1000 + 86_400, 2)),
        (0, 0, 50_000_000, 0, (50_000_000, 2)),
    ],
    ids=["same-day", "last-second", "next-day", "never"],
)
def test_activity_days(
    day_start_s: int, day_count: int, now_s: int, today: int, after_two: tuple[int, int]
) -> None:
    state = WorkerState(day_start_s=day_start_s, day_count=day_count)
    assert state.interactions_today(now_s) == today
    assert state.day_after(now_s, 2) == after_two
