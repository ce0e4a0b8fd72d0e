"""What catalog replicas read from the catalog origin (service token, as every
``/v1/internal/...`` route):

    GET  /v1/internal/catalog         every item this origin serves, with its vector
    POST /v1/internal/catalog/items   the items of up to 1,000 ids {"item_ids": [...]}

Both answer ``origin.catalog.snapshot``'s streamed msgpack frames, read from the index
this origin serves at the moment of the request (one index, however long the stream
takes; ids it does not hold are left out: a replica drops them) with the catalog's mark.
A replica loads its index with the first at start and on a rebuild or a gap, and the
changed items with the second (``origin.catalog_follower``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response, StreamingResponse

from origin.catalog.ingest import MAX_BATCH
from origin.catalog.snapshot import ITEMS_PATH, MEDIA_TYPE, SNAPSHOT_PATH, encode_frames
from origin.http.inputs import JsonBody, OriginOf

replicas_router = APIRouter()

SNAPSHOT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "msgpack frames (`origin.catalog.snapshot`): a head with the "
        "dimension, the count and the catalog's mark, frames of up to 1,000 items' "
        "payloads and float32 vectors, and an end frame repeating the count",
        "content": {MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
    },
}

ItemId = Annotated[str, Field(min_length=1, max_length=200)]


class CatalogItemsRequest(BaseModel):
    """The body of ``POST /v1/internal/catalog/items``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    item_ids: list[ItemId] = Field(min_length=1, max_length=MAX_BATCH)


@replicas_router.get(SNAPSHOT_PATH, response_class=Response, responses=SNAPSHOT_RESPONSES)
async def catalog_snapshot(origin: OriginOf) -> Response:
    """Every item this origin serves, streamed, for a replica to load."""
    index, mark = origin.index, origin.catalog_mark  # together: one catalog
    # A plain iterator: Starlette runs it in its thread pool, off the event loop.
    return StreamingResponse(encode_frames(index, mark), media_type=MEDIA_TYPE)


@replicas_router.post(ITEMS_PATH, response_class=Response, responses=SNAPSHOT_RESPONSES)
async def catalog_items(
    body: Annotated[CatalogItemsRequest, JsonBody.of(CatalogItemsRequest)], origin: OriginOf
) -> Response:
    """The items of ``item_ids`` this origin serves (the others are absent: deleted)."""
    index, mark = origin.index, origin.catalog_mark
    found = (index.row_of.get(item_id) for item_id in dict.fromkeys(body.item_ids))
    rows = [row for row in found if row is not None]
    return StreamingResponse(encode_frames(index, mark, rows), media_type=MEDIA_TYPE)
