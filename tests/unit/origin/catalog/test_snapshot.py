"""The catalog snapshot's wire format: what the catalog origin streams, what a replica
takes, and everything it refuses."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from origin.catalog.item_index import ItemIndex
from origin.catalog.replication import CatalogMark
from origin.catalog.snapshot import FRAME_ITEMS, SnapshotReader, encode_frames
from origin.exceptions import CatalogError, CatalogOriginError
from tests.unit.catalogs import make_catalog

DIM = 16
MARK = CatalogMark(42, "items__r3")


def index_of(size: int) -> ItemIndex:
    return make_catalog(size, seed=3, dim=DIM).index()


def read(chunks: list[bytes], dim: int = DIM) -> tuple[SnapshotReader, object]:
    reader = SnapshotReader(dim)
    for chunk in chunks:
        reader.feed(chunk)
    return reader, reader.finish()


@pytest.mark.parametrize("size", [0, 1, FRAME_ITEMS - 1, FRAME_ITEMS, 2 * FRAME_ITEMS + 5])
def test_a_snapshot_round_trips(size: int) -> None:
    index = index_of(size)
    frames = list(encode_frames(index, MARK))
    assert len(frames) == 2 + -(-size // FRAME_ITEMS)  # head, full frames, end
    reader = SnapshotReader(DIM)
    for frame in frames:
        reader.feed(frame)
    snapshot = reader.finish()
    assert snapshot.mark == MARK
    assert snapshot.items == index.items
    np.testing.assert_array_equal(snapshot.vectors, index.vectors)
    assert ItemIndex(snapshot.items, snapshot.vectors).row_of == index.row_of


def test_chunks_may_cut_frames_anywhere() -> None:
    index = index_of(30)
    body = b"".join(encode_frames(index, MARK))
    reader = SnapshotReader(DIM)
    for start in range(0, len(body), 7):
        reader.feed(body[start : start + 7])
    assert reader.finish().items == index.items


def test_chosen_rows_only() -> None:
    index = index_of(30)
    reader = SnapshotReader(DIM)
    for frame in encode_frames(index, CatalogMark(1, None), rows=[4, 2]):
        reader.feed(frame)
    snapshot = reader.finish()
    assert [i.item_id for i in snapshot.items] == [index.items[4].item_id, index.items[2].item_id]
    np.testing.assert_array_equal(snapshot.vectors, index.vectors[[4, 2]])
    assert snapshot.mark == CatalogMark(1, None)


def pack(doc: object) -> bytes:
    return msgpack.packb(doc, use_bin_type=True)


HEAD = {"v": 1, "dim": DIM, "count": 1, "version": 1, "slot": None}
ONE = list(encode_frames(index_of(1), CatalogMark(1, None)))
ITEMS = ONE[1]
END = pack({"end": 1})


@pytest.mark.parametrize(
    ("chunks", "problem"),
    [
        ([], "cut short after 0 of 0"),
        ([ONE[0], ITEMS], "cut short after 1 of 1"),  # the catalog origin died mid-answer
        ([pack([1, 2])], "not a map but list"),
        ([b"\xc1"], "not msgpack"),
        ([pack({**HEAD, "v": 2}), ITEMS, END], "unknown snapshot version 2"),
        ([pack({**HEAD, "dim": 8}), ITEMS, END], "dimension 8, PERSO_EMBEDDING_DIM is 16"),
        ([pack({**HEAD, "count": -1})], "head is malformed"),
        ([pack({**HEAD, "version": "1"})], "head is malformed"),
        ([pack({**HEAD, "slot": 3})], "head is malformed"),
        ([ONE[0], pack({"items": [], "vectors": "x"})], "no 'items' list and 'vectors' bytes"),
        ([ONE[0], pack({"items": [{}], "vectors": b"\x00" * 4})], "1 items has 4 bytes"),
        ([ONE[0], ITEMS, ITEMS], "more items than the 1 announced"),
        ([ONE[0], ITEMS, pack({"end": 2})], "ended at 2 items"),
        ([ONE[0], pack({"end": 1})], "ended at 1 items; its head announced 1, its frames held 0"),
        ([*ONE, END], "frames after its end"),
        ([ONE[0], pack({"items": [{"item_id": "x"}], "vectors": b"\x00" * 64}), END], "item 0"),
        ([ONE[0], pack({"items": ["x"], "vectors": b"\x00" * 64}), END], "item 0"),
    ],
)
def test_what_is_not_a_snapshot_is_refused(chunks: list[bytes], problem: str) -> None:
    with pytest.raises(CatalogOriginError, match=problem):
        read(chunks)
    assert issubclass(CatalogOriginError, CatalogError)
