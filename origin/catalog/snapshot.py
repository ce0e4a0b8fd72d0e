"""The catalog as a replica receives it from the catalog origin: a stream of msgpack frames.

``GET /v1/internal/catalog`` (everything) and ``POST /v1/internal/catalog/items`` (the
items of some ids) answer the same body, ``MEDIA_TYPE``: msgpack maps one after another,

    {"v": 1, "dim": 128, "count": N, "version": 42, "slot": "items__r3" | None}   head
    {"items": [payload, ...], "vectors": <bytes>}                               0 or more
    {"end": N}                                                                  last

where a payload is the item's Qdrant payload (``origin.catalog.items.to_payload``) and
``vectors`` the frame's unified vectors, float32 little-endian, row after row (the index's
own, already unit length). Frames hold ``FRAME_ITEMS`` items at most: the catalog origin
encodes one frame at a time as the body streams, and the replica decodes each as it
arrives (100,000 items at 128 dimensions are 79 MB). The end frame repeats the count: a
body cut short (a catalog origin that died mid-answer) is refused, never taken for a
smaller catalog.

``SnapshotReader`` is fed the body's chunks as they arrive and checks every frame; anything
that is not exactly such a stream raises ``CatalogOriginError`` naming the problem.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import msgpack
import numpy as np
import numpy.typing as npt

from origin.catalog.item_index import ItemIndex
from origin.catalog.items import Item, from_payload, to_payload
from origin.catalog.replication import CatalogMark
from origin.exceptions import CatalogOriginError

MEDIA_TYPE = "application/vnd.perso.catalog+msgpack"
SNAPSHOT_PATH = "/v1/internal/catalog"
ITEMS_PATH = "/v1/internal/catalog/items"
CODEC_VERSION = 1
FRAME_ITEMS = 1000
_FLOAT32 = np.dtype("<f4")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a replica received: the catalog's mark, its items and their vectors."""

    mark: CatalogMark
    items: list[Item]
    vectors: npt.NDArray[np.float32]


def encode_frames(
    index: ItemIndex, mark: CatalogMark, rows: Sequence[int] | None = None
) -> Iterator[bytes]:
    """The body for ``rows`` of ``index`` (default: every row), frame by frame. CPU work
    (a payload per item): iterate it off the event loop (a Starlette streaming response
    runs a plain iterator in its thread pool)."""
    chosen = np.arange(len(index), dtype=np.intp) if rows is None else np.asarray(rows, np.intp)
    head = {
        "v": CODEC_VERSION,
        "dim": index.dim,
        "count": int(chosen.size),
        "version": mark.version,
        "slot": mark.slot,
    }
    yield msgpack.packb(head, use_bin_type=True)
    for start in range(0, chosen.size, FRAME_ITEMS):
        part = chosen[start : start + FRAME_ITEMS]
        frame = {
            "items": [to_payload(index.items[int(row)]) for row in part],
            "vectors": index.vectors[part].astype(_FLOAT32).tobytes(),
        }
        yield msgpack.packb(frame, use_bin_type=True)
    yield msgpack.packb({"end": int(chosen.size)}, use_bin_type=True)


@dataclass
class SnapshotReader:
    """Reads one body, chunk by chunk (``feed``), into a ``Snapshot`` (``finish``) of
    vectors of ``dim`` dimensions (the replica's own setting)."""

    dim: int
    _unpacker: msgpack.Unpacker = field(
        default_factory=lambda: msgpack.Unpacker(raw=False), repr=False
    )
    _mark: CatalogMark | None = None
    _count: int = 0
    _ended: bool = False
    _payloads: list[dict[str, Any]] = field(default_factory=list, repr=False)
    _vectors: list[bytes] = field(default_factory=list, repr=False)

    def feed(self, chunk: bytes) -> None:
        try:
            self._unpacker.feed(chunk)
            for frame in self._unpacker:
                self._take(frame)
        except (ValueError, msgpack.UnpackException) as exc:  # ExtraData, BufferFull...
            raise CatalogOriginError(f"catalog snapshot is not msgpack: {exc}") from exc

    def _take(self, frame: object) -> None:
        if not isinstance(frame, dict):
            raise CatalogOriginError(f"snapshot frame is not a map but {type(frame).__name__}")
        if self._ended:
            raise CatalogOriginError("snapshot has frames after its end")
        if self._mark is None:
            self._head(frame)
        elif "end" in frame:
            if frame["end"] != self._count or len(self._payloads) != self._count:
                raise CatalogOriginError(
                    f"snapshot ended at {frame['end']!r} items; its head announced "
                    f"{self._count}, its frames held {len(self._payloads)}"
                )
            self._ended = True
        else:
            self._items(frame)

    def _head(self, frame: dict[str, Any]) -> None:
        if frame.get("v") != CODEC_VERSION:
            raise CatalogOriginError(f"unknown snapshot version {frame.get('v')!r}")
        dim, count, version, slot = (frame.get(k) for k in ("dim", "count", "version", "slot"))
        if dim != self.dim:
            raise CatalogOriginError(
                f"the catalog origin's vectors have dimension {dim!r}, "
                f"PERSO_EMBEDDING_DIM is {self.dim}"
            )
        if not (_count(count) and _count(version) and (slot is None or isinstance(slot, str))):
            raise CatalogOriginError(f"snapshot head is malformed: {frame!r}")
        self._mark, self._count = CatalogMark(version, slot), count

    def _items(self, frame: dict[str, Any]) -> None:
        payloads, vectors = frame.get("items"), frame.get("vectors")
        if not isinstance(payloads, list) or not isinstance(vectors, bytes):
            raise CatalogOriginError("snapshot frame has no 'items' list and 'vectors' bytes")
        if len(vectors) != len(payloads) * self.dim * _FLOAT32.itemsize:
            raise CatalogOriginError(
                f"snapshot frame of {len(payloads)} items has {len(vectors)} bytes of vectors"
            )
        if len(self._payloads) + len(payloads) > self._count:
            raise CatalogOriginError(f"snapshot holds more items than the {self._count} announced")
        self._payloads.extend(payloads)
        self._vectors.append(vectors)

    def finish(self) -> Snapshot:
        """The snapshot read; CatalogOriginError if the body ended early or an item's
        payload is not one. CPU work (an item per payload): run it off the event loop."""
        if self._mark is None or not self._ended:
            raise CatalogOriginError(
                f"snapshot cut short after {len(self._payloads)} of {self._count} items"
            )
        items = []
        for position, payload in enumerate(self._payloads):
            try:
                items.append(from_payload(payload))
            except (KeyError, ValueError, TypeError) as exc:
                raise CatalogOriginError(f"snapshot item {position}: {exc!r}") from exc
        raw = b"".join(self._vectors)
        vectors = np.frombuffer(raw, _FLOAT32).reshape(len(items), self.dim).astype(np.float32)
        return Snapshot(self._mark, items, vectors)


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
