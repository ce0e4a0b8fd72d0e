"""The origin's catalog admin API (bearer ``PERSO_ADMIN_TOKEN``): ingest and delete.

    POST   /v1/admin/catalog/items               insert or update up to 1,000 items
    DELETE /v1/admin/catalog/items/{item_id}     delete one item
    POST   /v1/admin/catalog/items:delete        delete up to 1,000 items {"item_ids": [...]}

The body is a JSON array of up to ``MAX_BATCH`` items (origin.catalog.ingest.CatalogItemIn);
the answer counts what happened to them::

    {"inserted": 2, "updated": 1, "unchanged": 0, "skipped": 0, "rejected": 0,
     "catalog_items": 10002, "latency_ms": 41.3}

A batch with any invalid item is refused whole with a 400 naming every field
(``"field": "[3].image", "reason": "has 64 numbers, image vectors have 128"``), nothing
written. Written items are visible to ``/v1/personalize`` when the answer arrives: the
router builds the new in-memory index off the event loop and swaps it in.

A delete answers ``{"deleted": [...], "absent": [...], "catalog_items": N, "latency_ms": x}``:
an id the catalog does not hold is ``absent`` (200, so a retry is harmless). Under the
``catalog-index`` lock it deletes the Redis vector, then the Qdrant point, then bumps
``catalog:version``; a rebuild's promotion holding the lock is a 409 with nothing deleted.
This origin's index is swapped before every region is told (``ItemUpdate`` removed); a
publish that fails is a 503 once the items are out of the catalog: every call announces
every id it names, so the retry finishes the job.

Ingests, deletes and a rebuild's index swap of one process take turns
(``Origin.catalog_writes``): each swap is computed from the index the previous write left.

Several origins (``origin.catalog.replication``): after its swap, the origin that wrote
tells the others through the origins' stream (``CatalogChange`` naming every id of the
call, so that a retried call finishes what a failed announcement left); a publish that
fails twice is a 503 ("retry the same batch"), the write itself done. A catalog replica
(``PERSO_CATALOG_ORIGIN_URL``) holds no store: every catalog write sent to it is a 409
naming the catalog origin, before its body is looked at.

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

from fastapi import APIRouter, Depends, FastAPI, Path, Request
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from starlette.responses import Response

from coordination.exceptions import LeaseLost, LockNotAcquired
from coordination.heartbeat import Heartbeat
from coordination.lock import DEFAULT, locked
from invalidation.rules import ItemRemoved
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
from origin.catalog.removal import Removed, delete_items
from origin.catalog.replication import CatalogMark
from origin.catalog.vector_store import VectorStore
from origin.http.inputs import JsonBody, OriginOf
from origin.runtime import Origin
from protocol import keys
from protocol.exceptions import ApiError
from web.openapi import declared
from web.problems import error_response
from web.responses import elapsed_ms, json_response


class IngestResponse(BaseModel):
    inserted: int
    updated: int
    unchanged: int  # same version as stored
    skipped: int  # older than stored
    rejected: int = 0  # an invalid batch is a 400 instead; the CLI counts its items here
    catalog_items: int  # items the origin serves after this batch
    latency_ms: float


ItemId = Annotated[str, Field(min_length=1, max_length=200)]


class DeleteItems(BaseModel):
    """The body of ``POST /v1/admin/catalog/items:delete``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    item_ids: list[ItemId] = Field(min_length=1, max_length=MAX_BATCH)


class DeleteResponse(BaseModel):
    deleted: list[str]  # were in the catalog, are not any more
    absent: list[str]  # the catalog did not hold them (never ingested, or deleted before)
    catalog_items: int  # items the origin serves after this delete
    latency_ms: float


@dataclass
class CatalogWriter:
    """What the admin router keeps per app: how to make vectors."""

    vectors: ItemVectors


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # Runs after the app's own lifespan has set ``app.state.origin``.
    settings = app.state.origin.settings
    vectors = await asyncio.to_thread(ItemVectors.from_settings, settings)
    app.state.catalog_writer = CatalogWriter(vectors)
    yield


log = logging.getLogger(__name__)

admin_router = APIRouter(lifespan=_lifespan)

CATALOG_ITEMS_PATH = "/v1/admin/catalog/items"
CATALOG_DELETE_PATH = "/v1/admin/catalog/items:delete"
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
    responses={200: {"model": IngestResponse}, **declared(409, 503)},
)
async def ingest_catalog_items(request: Request, store: StoreOf, items: CatalogItems) -> Response:
    """Insert or update catalog items, idempotent by item id and version."""
    started = time.perf_counter()
    origin: Origin = request.app.state.origin
    writer: CatalogWriter = request.app.state.catalog_writer
    problems = item_problems(items, writer.vectors.modality_dims)
    if problems:
        errors = [p.to_json() for p in problems]
        first = errors[0]
        return error_response(
            400, "invalid_request", first["reason"], field=first["field"], errors=errors
        )
    async with origin.catalog_writes:
        try:
            written, version = await _write(origin, store, items, writer.vectors)
        except LockNotAcquired as exc:
            raise promotion_conflict() from exc
        except LeaseLost as exc:
            raise ApiError(
                503,
                "catalog_lease_lost",
                "the catalog lock's lease lapsed before the write (another writer may hold "
                "it now): nothing was written; retry the same batch",
                retry_after_s=1,
            ) from exc
        if written.items:
            before = origin.index
            index = await asyncio.to_thread(before.upserted, written.items, written.unified)
            await origin.replace_index(index, _at(origin, version))
            # out of stock or repriced: every edge entry showing the item
            await origin.announce(item_changes(before, written.items))
        told = await origin.announce_catalog([item.item_id for item in items])
    if not told:
        raise ApiError(
            503,
            "sync_unavailable",
            "the items are in the catalog but the other origins could not be told; "
            "retry the same batch",
            retry_after_s=1,
        )
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


def writable_store(origin: Origin) -> VectorStore:
    """The store catalog writes go to; on a catalog replica, a 409 naming the catalog
    origin, which takes them."""
    if origin.store is None:
        raise ApiError(
            409,
            "catalog_replica",
            "this origin is a catalog replica: send catalog writes to the catalog origin, "
            f"{origin.settings.catalog_origin_url}",
        )
    return origin.store


async def _store_of(origin: OriginOf) -> VectorStore:
    return writable_store(origin)


# Route parameter, before the body's: a replica refuses a write before reading its body.
StoreOf = Annotated[VectorStore, Depends(_store_of)]


def _at(origin: Origin, version: int | None) -> CatalogMark | None:
    """The catalog's mark after a write that bumped its version to ``version`` (None: it
    changed nothing)."""
    return None if version is None else CatalogMark(version, origin.catalog_mark.slot)


async def _write(
    origin: Origin, store: VectorStore, items: list[CatalogItemIn], vectors: ItemVectors
) -> tuple[Written, int | None]:
    """The write and the catalog version's bump (the new version; None: nothing written),
    under the catalog lock: a rebuild that copied the catalog before it sees the version
    move and builds again. A lease lost before the first write (``LeaseLost``) writes
    nothing; one lost after still bumps the version, which tells a rebuild that took the
    lock since to build again."""
    version: int | None = None
    async with (
        locked(origin.lock, CATALOG_RESOURCE, INGEST_TTL_MS, retry=DEFAULT) as lease,
        Heartbeat(origin.lock, lease, INGEST_TTL_MS / 3000) as beat,
    ):
        written = await ingest_items(
            items, vectors=vectors, store=store, redis=origin.redis, before_writing=beat.check
        )
        if written.items:
            version = int(await origin.redis.incr(keys.CATALOG_VERSION))
    return written, version


def promotion_conflict() -> ApiError:
    return ApiError(409, "conflict", "the catalog index is being promoted; retry", retry_after_s=1)


async def _delete(
    origin: Origin, store: VectorStore, item_ids: list[str]
) -> tuple[Removed, int | None]:
    """The delete and the catalog version's bump, under the catalog lock (as ``_write``)."""
    version: int | None = None
    async with locked(origin.lock, CATALOG_RESOURCE, INGEST_TTL_MS, retry=DEFAULT):
        removed = await delete_items(item_ids, store=store, redis=origin.redis)
        if removed.deleted:
            version = int(await origin.redis.incr(keys.CATALOG_VERSION))
    return removed, version


async def remove_items(
    origin: Origin, store: VectorStore, item_ids: list[str], started: float
) -> Response:
    """Delete ``item_ids`` (no repeats), swap the index, tell every region and origin."""
    async with origin.catalog_writes:
        try:
            removed, version = await _delete(origin, store, item_ids)
        except LockNotAcquired as exc:
            raise promotion_conflict() from exc
        before = origin.index
        # Every id, not only those Qdrant held: another origin may have deleted one first.
        if any(i in before.row_of for i in item_ids):
            index = await asyncio.to_thread(before.without, item_ids)
            await origin.replace_index(index, _at(origin, version))
        elif version is not None:
            await origin.replace_index(before, _at(origin, version))
        edges_told = await origin.announce(ItemRemoved(i) for i in item_ids)
        origins_told = await origin.announce_catalog(item_ids)
    if not (edges_told and origins_told):
        raise ApiError(
            503,
            "sync_unavailable",
            "the items are out of the catalog but not every region's edges and origin "
            "could be told; retry the same delete",
            retry_after_s=1,
        )
    answer = DeleteResponse(
        deleted=removed.deleted,
        absent=removed.absent,
        catalog_items=len(origin.index),
        latency_ms=elapsed_ms(started),
    )
    return json_response(answer)


DELETE_RESPONSES: dict[int | str, dict[str, object]] = {
    200: {"model": DeleteResponse},
    **declared(409, 503),
}


@admin_router.delete(
    CATALOG_ITEMS_PATH + "/{item_id}", response_class=Response, responses=DELETE_RESPONSES
)
async def delete_catalog_item(
    store: StoreOf, item_id: Annotated[str, Path(min_length=1, max_length=200)], origin: OriginOf
) -> Response:
    """Delete one item from the catalog and every edge; an unknown id is ``absent``."""
    return await remove_items(origin, store, [item_id], time.perf_counter())


@admin_router.post(CATALOG_DELETE_PATH, response_class=Response, responses=DELETE_RESPONSES)
async def delete_catalog_items(
    store: StoreOf, body: Annotated[DeleteItems, JsonBody.of(DeleteItems)], origin: OriginOf
) -> Response:
    """Delete up to 1,000 items from the catalog and every edge; unknown ids are ``absent``."""
    item_ids = list(dict.fromkeys(body.item_ids))
    return await remove_items(origin, store, item_ids, time.perf_counter())
