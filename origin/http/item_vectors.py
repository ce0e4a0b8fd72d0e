"""``POST /v1/internal/item-vectors`` and ``.../items``: the catalog's item vectors as an
edge holds them (``protocol.item_vectors``): a page of the whole catalog, for an edge that
starts cold, or the items the sync stream said changed (``sync.messages.ItemsChanged``).
Read from the index this origin serves at the moment of the request, quantized to int8
with a scale a row (``relevance.quantized_lists.quantized``), with the catalog's version
and size; asked ids it does not hold are ``absent`` (deleted: the edge drops them).
Service token, as every ``/v1/internal/...`` route.
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
import numpy.typing as npt
from fastapi import APIRouter
from starlette.responses import Response

from origin.catalog.item_index import ItemIndex
from origin.http.inputs import JsonBody, OriginOf
from origin.runtime import Origin
from protocol.item_vectors import (
    ITEM_VECTORS_MEDIA_TYPE,
    ITEM_VECTORS_OF_PATH,
    ITEM_VECTORS_PATH,
    ItemVectors,
    ItemVectorsOf,
    ItemVectorsPage,
    encode_item_vectors,
)
from relevance.quantized_lists import quantized

item_vectors_router = APIRouter()

ITEM_VECTORS_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "msgpack (`protocol.item_vectors`): the catalog's version and size, "
        "and the items' ids, int8 codes and scales",
        "content": {ITEM_VECTORS_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
    },
}


@item_vectors_router.post(
    ITEM_VECTORS_PATH, response_class=Response, responses=ITEM_VECTORS_RESPONSES
)
async def item_vectors_page(
    body: Annotated[ItemVectorsPage, JsonBody.of(ItemVectorsPage)], origin: OriginOf
) -> Response:
    """A page of the catalog's item vectors, in the index's order."""
    index = origin.index
    rows = np.arange(body.offset, min(body.offset + body.limit, len(index)), dtype=np.intp)
    return _answer(origin, index, rows, absent=())


@item_vectors_router.post(
    ITEM_VECTORS_OF_PATH, response_class=Response, responses=ITEM_VECTORS_RESPONSES
)
async def item_vectors_of(
    body: Annotated[ItemVectorsOf, JsonBody.of(ItemVectorsOf)], origin: OriginOf
) -> Response:
    """The item vectors of ``item_ids``; the ids the catalog does not hold are absent."""
    index = origin.index
    absent: list[str] = []
    found = []
    for item_id in dict.fromkeys(body.item_ids):
        row = index.row_of.get(item_id)
        if row is None:
            absent.append(item_id)
        else:
            found.append(row)
    return _answer(origin, index, np.array(found, np.intp), absent=tuple(absent))


def _answer(
    origin: Origin, index: ItemIndex, rows: npt.NDArray[np.intp], *, absent: tuple[str, ...]
) -> Response:
    codes, scales = quantized(index.vectors[rows].reshape(rows.size, index.dim))
    answer = ItemVectors(
        version=origin.catalog_mark.version,
        total=len(index),
        item_ids=tuple(str(i) for i in index.item_ids[rows]),
        codes=codes,
        scales=scales,
        absent=absent,
    )
    return Response(encode_item_vectors(answer), media_type=ITEM_VECTORS_MEDIA_TYPE)
