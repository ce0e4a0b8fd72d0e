"""The origin's admin API: ``POST /v1/admin/catalog/items`` (bearer ``PERSO_ADMIN_TOKEN``).

The body is a JSON array of up to ``MAX_BATCH`` items (origin.catalog.ingest.CatalogItemIn);
the answer counts what happened to them::

    {"inserted": 2, "updated": 1, "unchanged": 0, "skipped": 0, "rejected": 0,
     "catalog_items": 10002, "latency_ms": 41.3}

A batch with any invalid item is refused whole with a 400 naming every field
(``"field": "[3].image", "reason": "has 64 numbers, image vectors have 128"``), nothing
written. Written items are visible to ``/v1/personalize`` when the answer arrives: the
router builds the new in-memory index off the event loop and swaps it in.

The text encoder and the fusion weights are loaded when the origin starts (this router's
lifespan), so a bad ``PERSO_FUSION_WEIGHTS`` stops the origin at start-up, not at the
first ingest.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, Field, TypeAdapter
from starlette.responses import Response

from coordination.exceptions import LockNotAcquired
from coordination.heartbeat import Heartbeat
from coordination.lock import DEFAULT, locked
from origin.catalog.events import item_changes
from origin.catalog.ingest import (
    MAX_BATCH,
    CatalogItemIn,
    Written,
    ingest_items,
    item_problems,
)
from origin.catalog.item_vectors import ItemVectors
from origin.catalog.rebuild import CATALOG_RESOURCE
from origin.http.inputs import JsonBody
from origin.runtime import Origin
from protocol import keys
from protocol.exceptions import ApiError
from protocol.openapi import declared
from protocol.problems import error_response
from protocol.responses import elapsed_ms, json_response


class IngestResponse(BaseModel):
    inserted: int
    updated: int
    unchanged: int  # same version as stored
    skipped: int  # older than stored
    rejected: int = 0  # an invalid batch is a 400 instead; the CLI counts its items here
    catalog_items: int  # items the origin serves after this batch
    latency_ms: float


@dataclass
class CatalogWriter:
    """What the admin router keeps per app: how to make vectors, one ingest at a time."""

    vectors: ItemVectors
    lock: asyncio.Lock


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # Runs after the app's own lifespan has set ``app.state.origin``.
    settings = app.state.origin.settings
    vectors = await asyncio.to_thread(ItemVectors.from_settings, settings)
    app.state.catalog_writer = CatalogWriter(vectors, asyncio.Lock())
    yield


log = logging.getLogger(__name__)

admin_router = APIRouter(lifespan=_lifespan)

CATALOG_ITEMS_PATH = "/v1/admin/catalog/items"
CatalogItems = Annotated[
    list[CatalogItemIn],
    JsonBody(
        TypeAdapter(Annotated[list[CatalogItemIn], Field(min_length=1, max_length=MAX_BATCH)]),
        "CatalogItems",
    ).depends(),
]
# The lease of one batch's write; the heartbeat renews it while encoding takes long.
INGEST_TTL_MS = 30_000


@admin_router.post(
    CATALOG_ITEMS_PATH,
    response_class=Response,
    responses={200: {"model": IngestResponse}, **declared(409)},
)
async def ingest_catalog_items(request: Request, items: CatalogItems) -> Response:
    """Insert or update catalog items, idempotent by item id and version."""
    started = time.perf_counter()
    origin = request.app.state.origin
    writer: CatalogWriter = request.app.state.catalog_writer
    problems = item_problems(items, writer.vectors.modality_dims)
    if problems:
        errors = [p.to_json() for p in problems]
        first = errors[0]
        return error_response(
            400, "invalid_request", first["reason"], field=first["field"], errors=errors
        )
    async with writer.lock:
        try:
            written = await _write(origin, items, writer.vectors)
        except LockNotAcquired as exc:
            raise ApiError(
                409, "conflict", "the catalog index is being promoted; retry", retry_after_s=1
            ) from exc
        if written.items:
            before = origin.index
            index = await asyncio.to_thread(before.upserted, written.items, written.unified)
            await origin.replace_index(index)
            # out of stock or repriced: every edge entry showing the item
            await origin.announce(item_changes(before, written.items))
    report = written.report
    answer = IngestResponse(
        inserted=report.inserted,
        updated=report.updated,
        unchanged=report.unchanged,
        skipped=report.skipped,
        catalog_items=len(origin.index),
        latency_ms=elapsed_ms(started),
    )
    return json_response(answer)


async def _write(origin: Origin, items: list[CatalogItemIn], vectors: ItemVectors) -> Written:
    """The write and the catalog version's bump, under the catalog lock: a rebuild that
    copied the catalog before it sees the version move and builds again."""
    async with (
        locked(origin.lock, CATALOG_RESOURCE, INGEST_TTL_MS, retry=DEFAULT) as lease,
        Heartbeat(origin.lock, lease, INGEST_TTL_MS / 3000),
    ):
        written = await ingest_items(items, vectors=vectors, store=origin.store, redis=origin.redis)
        if written.items:
            await origin.redis.incr(keys.CATALOG_VERSION)
    return written
