"""Vectors on the wire and in Redis: float32, little-endian, no header."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]

_DTYPE = np.dtype("<f4")


def pack_vector(vector: npt.ArrayLike) -> bytes:
    return np.asarray(vector, dtype=_DTYPE).tobytes()


def unpack_vector(raw: bytes, dim: int) -> Vector:
    """Decode a vector, refusing bytes of the wrong length (a dimension change is an error,
    not a silently truncated vector)."""
    if len(raw) != dim * _DTYPE.itemsize:
        raise ValueError(f"expected {dim * _DTYPE.itemsize} bytes for dim {dim}, got {len(raw)}")
    return np.frombuffer(raw, dtype=_DTYPE).astype(np.float32)


def l2_normalize(vector: Vector) -> Vector:
    norm = float(np.linalg.norm(vector))
    if norm == 0.0 or not np.isfinite(norm):
        return vector
    return (vector / norm).astype(np.float32)
