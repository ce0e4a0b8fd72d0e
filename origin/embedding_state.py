"""The stream worker's state of one user, in one compact binary string (``u:{id}:st``).

Layout, little-endian: version (u32), updated ms (u64), dimension (u16), flags (u8: bit 0
= has momentum), window length (u8), start of the current activity day (u32, epoch
seconds) and the interactions applied in it (u16), then the momentum as float16
(dimension values, when present), then the window: the 64-bit hashes of the last
``WINDOW`` interactions applied, oldest first (seed 000's "interaction_window: last 50",
kept as hashes: what the worker needs from it is "was this one applied already?").

The embedding itself is published separately (``u:{id}:emb``, float16) for the origin and
the edges to read; the version in this state is the compare-and-set token of both.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from protocol.exceptions import MalformedMessage
from protocol.vectors import Vector

WINDOW = 50
_HEADER = struct.Struct("<IQHBBIH")
DAY_S = 86_400
_HAS_MOMENTUM = 1


def interaction_hash(interaction_id: str) -> int:
    """64-bit digest of an interaction id (blake2b: stable across processes and hosts)."""
    digest = hashlib.blake2b(interaction_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


@dataclass(frozen=True)
class WorkerState:
    version: int = 0
    updated_ms: int = 0
    momentum: Vector | None = None
    window: tuple[int, ...] = ()
    day_start_s: int = 0
    day_count: int = 0

    def interactions_today(self, now_s: int) -> int:
        """Interactions applied in the current activity day (a day starts at the first
        interaction after the previous one ended): the measure of the freshness tier."""
        return self.day_count if now_s - self.day_start_s < DAY_S else 0

    def day_after(self, now_s: int, applied: int) -> tuple[int, int]:
        """(day start, count) once ``applied`` more interactions are in."""
        if now_s - self.day_start_s < DAY_S:
            return self.day_start_s, min(0xFFFF, self.day_count + applied)
        return now_s, min(0xFFFF, applied)

    def applied(self, interaction: int) -> bool:
        return interaction in self.window

    def with_applied(self, interactions: Iterable[int]) -> tuple[int, ...]:
        """The window after ``interactions`` (oldest first), keeping the last ``WINDOW``."""
        return (*self.window, *interactions)[-WINDOW:]


def encode_state(state: WorkerState, dim: int) -> bytes:
    flags = _HAS_MOMENTUM if state.momentum is not None else 0
    window = state.window[-WINDOW:]
    parts = [
        _HEADER.pack(
            state.version,
            state.updated_ms,
            dim,
            flags,
            len(window),
            state.day_start_s,
            min(0xFFFF, state.day_count),
        )
    ]
    if state.momentum is not None:
        parts.append(np.asarray(state.momentum, dtype="<f2").tobytes())
    parts.append(np.asarray(window, dtype="<u8").tobytes())
    return b"".join(parts)


def decode_state(raw: bytes | None, dim: int) -> WorkerState:
    """The stored state; None is a user never seen. A state of another dimension (the
    configured dimension changed) keeps its version and window but not its momentum."""
    if not raw:
        return WorkerState()
    if len(raw) < _HEADER.size:
        raise MalformedMessage(f"user state of {len(raw)} bytes is shorter than its header")
    version, updated_ms, stored_dim, flags, length, day_start_s, day_count = _HEADER.unpack_from(
        raw
    )
    offset = _HEADER.size
    momentum: Vector | None = None
    if flags & _HAS_MOMENTUM:
        end = offset + 2 * stored_dim
        if stored_dim == dim:
            momentum = np.frombuffer(raw[offset:end], dtype="<f2").astype(np.float32)
        offset = end
    if len(raw) != offset + 8 * length:
        raise MalformedMessage(f"user state of {len(raw)} bytes does not match its header")
    window = tuple(int(h) for h in np.frombuffer(raw[offset:], dtype="<u8"))
    return WorkerState(version, updated_ms, momentum, window, day_start_s, day_count)


def state_version(raw: bytes | None) -> int:
    return _HEADER.unpack_from(raw)[0] if raw and len(raw) >= _HEADER.size else 0
