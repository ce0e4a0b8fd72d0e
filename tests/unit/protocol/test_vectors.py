from __future__ import annotations

import numpy as np
import pytest

from protocol.vectors import l2_normalize, pack_half, pack_vector, unpack_vector


def test_round_trip_is_float32_little_endian() -> None:
    vector = np.array([1.0, -2.5, 3.25], dtype=np.float32)
    raw = pack_vector(vector)
    assert raw == np.array([1.0, -2.5, 3.25], dtype="<f4").tobytes()
    assert np.array_equal(unpack_vector(raw, 3), vector)


def test_unpack_refuses_a_wrong_dimension() -> None:
    with pytest.raises(
        ValueError, match=r"expected 16 \(float32\) or 8 \(float16\) bytes for dim 4, got 12"
    ):
        unpack_vector(pack_vector([1, 2, 3]), 4)


@pytest.mark.parametrize(
    "vector",
    [[1.0, 0.0, 0.0, 0.0], [0.5, -0.5, 0.5, -0.5], [0.1234, 0.5678, -0.9, 0.0]],
    ids=["axis", "halves", "fractions"],
)
def test_half_precision_round_trips_within_its_precision(vector: list[float]) -> None:
    raw = pack_half(vector)
    assert len(raw) == 8
    np.testing.assert_allclose(unpack_vector(raw, 4), vector, atol=1e-3)


@pytest.mark.parametrize(
    ("vector", "expected"),
    [([3.0, 4.0], [0.6, 0.8]), ([0.0, 0.0], [0.0, 0.0]), ([0.0, -2.0], [0.0, -1.0])],
)
def test_l2_normalize(vector: list[float], expected: list[float]) -> None:
    out = l2_normalize(np.array(vector, dtype=np.float32))
    assert out.dtype == np.float32
    assert np.allclose(out, expected)
