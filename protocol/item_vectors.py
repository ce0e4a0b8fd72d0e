"""The catalog's item vectors as an edge holds them (edge retrieval: a known user's own
candidates retrieved at the edge), and the wire between the origin and an edge.

``POST /v1/internal/item-vectors`` (the service token, as every edge call) answers a page
of the whole catalog (``ItemVectorsPage``: ``offset``, ``limit``; an edge that starts cold
reads it page by page), ``POST /v1/internal/item-vectors/items`` some items
(``ItemVectorsOf``: ``item_ids``, those the sync stream said changed,
``sync.messages.ItemsChanged``). The answer (``encode_item_vectors``) is a
msgpack map

    {"v": 1, "version": 42, "dim": 128, "total": N, "ids": [...], "codes": <bytes>,
     "scales": <bytes>, "absent": [...]}

``version`` and ``total`` are the catalog's (``catalog:version``, its item count) when the
origin answered; ``codes`` the items' unit vectors as int8, row after row, and ``scales``
each row's float32 scale, little-endian (``relevance.quantized_lists.quantized``: a row is
codes x scale); ``absent``, the asked ids the catalog does not hold (deleted). Decoding is
strict: a missing or ill-typed field, or arrays whose sizes disagree with the ids, raise
``MalformedMessage`` naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgpack
import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from protocol.api import Identifier, Integer
from protocol.exceptions import MalformedMessage
from protocol.packed import array, strings, typed, unpack_map

ITEM_VECTORS_PATH = "/v1/internal/item-vectors"
ITEM_VECTORS_OF_PATH = "/v1/internal/item-vectors/items"
ITEM_VECTORS_MEDIA_TYPE = "application/vnd.perso.item-vectors+msgpack"
ITEM_VECTORS_VERSION = 1
# Items in one answer at most: a page of a catalog of 100K items at dimension 128 is
# 660 KB, well inside an origin call's deadline.
MAX_PAGE = 5_000


class ItemVectorsPage(BaseModel):
    """The body of ``POST /v1/internal/item-vectors``: a page of the whole catalog, in the
    order the origin's index holds it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    offset: Integer = Field(default=0, ge=0)
    limit: Integer = Field(default=MAX_PAGE, ge=1, le=MAX_PAGE)


class ItemVectorsOf(BaseModel):
    """The body of ``POST /v1/internal/item-vectors/items``: the items of some ids."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    item_ids: list[Identifier] = Field(min_length=1, max_length=MAX_PAGE)


ItemVectorsRequest = ItemVectorsPage | ItemVectorsOf


@dataclass(frozen=True, slots=True, eq=False)
class ItemVectors:
    version: int  # the catalog's when the origin answered
    total: int  # the catalog's items then
    item_ids: tuple[str, ...]
    codes: npt.NDArray[np.int8]  # (n, dim)
    scales: npt.NDArray[np.float32]  # (n,)
    absent: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.item_ids)

    @property
    def dim(self) -> int:
        return int(self.codes.shape[1])


def encode_item_vectors(vectors: ItemVectors) -> bytes:
    doc = {
        "v": ITEM_VECTORS_VERSION,
        "version": vectors.version,
        "dim": vectors.dim,
        "total": vectors.total,
        "ids": list(vectors.item_ids),
        "codes": np.ascontiguousarray(vectors.codes, np.int8).tobytes(),
        "scales": np.asarray(vectors.scales, "<f4").tobytes(),
        "absent": list(vectors.absent),
    }
    return msgpack.packb(doc, use_bin_type=True)


def decode_item_vectors(raw: bytes) -> ItemVectors:
    what = "item vectors"
    doc = unpack_map(raw, what, version=ITEM_VECTORS_VERSION)
    version = typed(doc, what, "version", int)
    total = typed(doc, what, "total", int)
    dim = typed(doc, what, "dim", int)
    if dim <= 0 or total < 0:
        raise MalformedMessage(f"{what}: field 'dim' or 'total' out of range: {dim}, {total}")
    ids = strings(doc, what, "ids")
    n = len(ids)
    codes = array(doc, what, "codes", "i1", n * dim).reshape(n, dim)
    scales = array(doc, what, "scales", "<f4", n, positive=True)
    return ItemVectors(
        version=version,
        total=total,
        item_ids=tuple(ids),
        codes=codes.astype(np.int8),
        scales=scales.astype(np.float32),
        absent=tuple(strings(doc, what, "absent")),
    )
