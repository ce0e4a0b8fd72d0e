"""Vectors on the wire and in Redis: little-endian, no header; float32, or float16 where
space matters more than the fourth significant digit (user embeddings: a unit vector
loses nothing a ranking can see, and takes half the memory)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]

_DTYPE = np.dtype("<f4")
_HALF = np.dtype("<f2")


def pack_vector(vector: npt.ArrayLike) -> bytes:
    return np.asarray(vector, dtype=_DTYPE).tobytes()


def pack_half(vector: npt.ArrayLike) -> bytes:
    """float16 bytes (values beyond float16's range become infinite: unit vectors only)."""
    return np.asarray(vector, dtype=_HALF).tobytes()


def unpack_vector(raw: bytes, dim: int) -> Vector:
    """Decode a float32 or float16 vector (told apart by length), refusing bytes of any
    other length (a dimension change is an error, not a silently truncated vector)."""
    if len(raw) == dim * _DTYPE.itemsize:
        return np.frombuffer(raw, dtype=_DTYPE).astype(np.float32)
    if len(raw) == dim * _HALF.itemsize:
        return np.frombuffer(raw, dtype=_HALF).astype(np.float32)
    raise ValueError(
        f"expected {dim * _DTYPE.itemsize} (float32) or {dim * _HALF.itemsize} (float16) "
        f"bytes for dim {dim}, got {len(raw)}"
    )


def l2_normalize(vector: Vector) -> Vector:
    norm = float(np.linalg.norm(vector))
    if norm == 0.0 or not np.isfinite(norm):
        return vector
    return (vector / norm).astype(np.float32)
