from __future__ import annotations

import numpy as np
import pytest

from protocol.vectors import l2_normalize, pack_vector, unpack_vector


def test_round_trip_is_float32_little_endian() -> None:
    vector = np.array([1.0, -2.5, 3.25], dtype=np.float32)
    raw = pack_vector(vector)
    assert raw == np.array([1.0, -2.5, 3.25], dtype="<f4").tobytes()
    assert np.array_equal(unpack_vector(raw, 3), vector)


def test_unpack_refuses_a_wrong_dimension() -> None:
    with pytest.raises(ValueError, match="expected 16 bytes for dim 4, got 12"):
        unpack_vector(pack_vector([1, 2, 3]), 4)


@pytest.mark.parametrize(
    ("vector", "expected"),
    [([3.0, 4.0], [0.6, 0.8]), ([0.0, 0.0], [0.0, 0.0]), ([0.0, -2.0], [0.0, -1.0])],
)
def test_l2_normalize(vector: list[float], expected: list[float]) -> None:
    out = l2_normalize(np.array(vector, dtype=np.float32))
    assert out.dtype == np.float32
    assert np.allclose(out, expected)
