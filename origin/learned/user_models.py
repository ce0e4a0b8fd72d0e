"""Each user as the stream workers keep them, in one compact binary string (``u:{id}:st``):
their model (``relevance.user_model``), the compare-and-set version, and what the workers
need to apply each observation once and to tier freshness.

Layout, little-endian: version (u32), updated ms (u64), dimension (u16), flags (u8: bit 0
= has a model), window length (u8), start of the current activity day (u32, epoch
seconds) and the interactions applied in it (u16); then the model, its mean and its
variance as float16 (dimension values each, when present); then the window: the 64-bit
hashes of the last ``WINDOW`` observations applied (interaction ids, and the closings of
joined decisions), oldest first (the interaction window, "last 50", kept as hashes:
what the worker needs from it is "was this one applied already?").

The origin reads the model from the same key. 934 bytes at the default dimension of 128
with a full window, 1,016 bytes of Redis memory (``benchmarks.stream_worker``; the
per-user state's bound: at most 5 KB).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from protocol.exceptions import MalformedMessage
from relevance.user_model import UserModel, model_bytes, model_from_bytes

WINDOW = 50
_HEADER = struct.Struct("<IQHBBIH")
_VERSION = struct.Struct("<I")  # the header's first field
DAY_S = 86_400
_HAS_MODEL = 1


def observation_hash(observation_id: str) -> int:
    """64-bit digest of an observation's id (blake2b: stable across processes and hosts)."""
    digest = hashlib.blake2b(observation_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


@dataclass(frozen=True)
class UserRecord:
    """A user as stored: their model (None before their first observation), the version
    every write bumps, and the window and activity day of the observations applied."""

    version: int = 0
    updated_ms: int = 0
    model: UserModel | None = None
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

    def applied(self, observation: int) -> bool:
        return observation in self.window

    def with_applied(self, observations: Iterable[int]) -> tuple[int, ...]:
        """The window after ``observations`` (oldest first), keeping the last ``WINDOW``."""
        return (*self.window, *observations)[-WINDOW:]


def encode_record(record: UserRecord, dim: int) -> bytes:
    model = record.model
    window = record.window[-WINDOW:]
    parts = [
        _HEADER.pack(
            record.version,
            record.updated_ms,
            dim,
            _HAS_MODEL if model is not None else 0,
            len(window),
            record.day_start_s,
            min(0xFFFF, record.day_count),
        )
    ]
    if model is not None:
        parts.append(model_bytes(model))
    parts.append(np.asarray(window, dtype="<u8").tobytes())
    return b"".join(parts)


def decode_record(raw: bytes | None, dim: int) -> UserRecord:
    """The stored record; None is a user never seen. A record of another dimension (the
    configured dimension changed) keeps its version and window but not its model."""
    if not raw:
        return UserRecord()
    if len(raw) < _HEADER.size:
        raise MalformedMessage(f"user record of {len(raw)} bytes is shorter than its header")
    version, updated_ms, stored_dim, flags, length, day_start_s, day_count = _HEADER.unpack_from(
        raw
    )
    offset = _HEADER.size
    model: UserModel | None = None
    if flags & _HAS_MODEL:
        end = offset + 4 * stored_dim
        if len(raw) < end:
            raise MalformedMessage(f"user record of {len(raw)} bytes is shorter than its model")
        if stored_dim == dim:
            model = model_from_bytes(raw[offset:end], dim)
        offset = end
    if len(raw) != offset + 8 * length:
        raise MalformedMessage(f"user record of {len(raw)} bytes does not match its header")
    window = tuple(int(h) for h in np.frombuffer(raw[offset:], dtype="<u8"))
    return UserRecord(version, updated_ms, model, window, day_start_s, day_count)


def record_version(raw: bytes | None) -> int:
    """The version of a stored record (0: none), read from its first four bytes alone, as
    the workers' compare-and-set reads it (``origin.worker.batch.CAS_WRITE``): were the two
    to differ on a damaged record, every write to it would conflict, forever."""
    return _VERSION.unpack_from(raw)[0] if raw and len(raw) >= _VERSION.size else 0
