"""The origin's coordination admin API (bearer ``PERSO_ADMIN_TOKEN``): locks and rebuilds.

    GET    /v1/admin/locks                    the well-known resources and their holders
    GET    /v1/admin/locks/{resource}         one resource: holder token, fencing, TTL left
    DELETE /v1/admin/locks/{resource}         force release (a holder that died holding it)
    POST   /v1/admin/catalog/rebuild          blue-green rebuild of the catalog index
    GET    /v1/admin/catalog/rebuild/{id}     a rebuild's status: in_progress, done, timeout
    GET    /v1/admin/catalog/index            the live slot, the fenced record, every slot

A rebuild takes the ``Idempotency-Key`` header as its id (a fresh one when absent): the same
key never runs twice while its result is kept (an hour), and concurrent requests with it
share one run. The answer is 202 with the status URL, or, with ``?wait=true``, 200 with the
result once it is done.

On a catalog replica (``PERSO_CATALOG_ORIGIN_URL``), which holds no vector store, a rebuild
and the index's description are a 409 naming the catalog origin. After its rebuild, the
catalog origin tells the other origins (``CatalogChange``, everything): each reloads the
new slot's catalog.

Force release frees a resource whoever holds it. The evicted holder is not told; what keeps
it harmless is fencing: its token is older than the next holder's, so the fenced stores
(``catalog:index``, ``model:deployment``) refuse it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Request
from pydantic import BaseModel
from starlette.responses import JSONResponse, Response

from coordination.exceptions import CoordinationError
from coordination.flight_record import FlightRecord, JsonValue
from coordination.single_flight import IdempotencyConfig, SingleFlight
from origin.catalog.deployment import DEPLOYMENT_RESOURCE
from origin.catalog.item_index import load_index
from origin.catalog.rebuild import CATALOG_RESOURCE, VECTOR_WRITE_BATCH, IndexRebuilder
from origin.catalog.replication import read_mark
from origin.catalog.vector_store import VectorStore
from origin.exceptions import CatalogError
from origin.http.admin import writable_store
from origin.http.inputs import OriginOf
from origin.runtime import Origin
from protocol import keys
from protocol.exceptions import ApiError
from protocol.vectors import pack_vector
from web.openapi import declared

log = logging.getLogger(__name__)

coordination_router = APIRouter()

# The resources an operator may want to look at, besides per-user ones (``preferences:<u>``).
KNOWN_RESOURCES = (DEPLOYMENT_RESOURCE, CATALOG_RESOURCE, keys.STREAM_TRIMMER)
RESOURCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9:._-]{0,199}$")
# A rebuild's single-flight: its result kept an hour, a run in progress ten minutes.
REBUILDS = IdempotencyConfig(scope="catalog_rebuild", ttl_ms=3_600_000, in_progress_ttl_ms=600_000)


class LockStatus(BaseModel):
    resource: str
    held: bool
    holder: str | None = None  # the holder token's first 8 characters
    fencing: int | None = None
    remaining_ms: int | None = None
    held_here: bool | None = None


class LockStats(BaseModel):
    grants: int
    contended: int
    gave_up: int
    lost: int
    forced_releases: int


class Locks(BaseModel):
    locks: list[LockStatus]
    held_here: list[str]
    stats: LockStats


class Released(BaseModel):
    resource: str
    released: bool
    holder: str
    fencing: int


class RebuildStatus(BaseModel):
    rebuild_id: str
    status: str  # in_progress, done, failed, timeout
    status_url: str | None = None
    started_ms: int | None = None
    finished_ms: int | None = None
    result: Any = None
    error: str | None = None


# Path and header parameters as the API document declares them (FastAPI checks them too).
ResourceName = Annotated[str, Path(pattern=RESOURCE.pattern)]
RebuildId = Annotated[str, Path(pattern=RESOURCE.pattern)]


def _resource(resource: str) -> str:
    if not RESOURCE.match(resource):
        raise ApiError(
            400,
            "invalid_request",
            "1-200 characters: letters, digits and : . _ -, starting with a letter or digit",
            field="resource",
        )
    return resource


async def _status(origin: Origin, resource: str) -> dict[str, object]:
    info = await origin.lock.info(resource)
    if info is None:
        return {"resource": resource, "held": False}
    return {
        "resource": resource,
        "held": True,
        # A prefix names the holder in logs; the whole token would let anyone release it.
        "holder": info.token[:8],
        "fencing": info.fencing,
        "remaining_ms": info.remaining_ms,
        "held_here": resource in origin.lock.held,
    }


@coordination_router.get(
    "/v1/admin/locks", response_class=Response, responses={200: {"model": Locks}}
)
async def list_locks(origin: OriginOf) -> Response:
    statuses = [await _status(origin, r) for r in KNOWN_RESOURCES]
    stats = origin.lock.stats
    return JSONResponse(
        {
            "locks": statuses,
            "held_here": sorted(origin.lock.held),
            "stats": {
                "grants": stats.grants,
                "contended": stats.contended,
                "gave_up": stats.gave_up,
                "lost": stats.lost,
                "forced_releases": stats.forced_releases,
            },
        }
    )


@coordination_router.get(
    "/v1/admin/locks/{resource}", response_class=Response, responses={200: {"model": LockStatus}}
)
async def lock_status(resource: ResourceName, origin: OriginOf) -> Response:
    return JSONResponse(await _status(origin, _resource(resource)))


@coordination_router.delete(
    "/v1/admin/locks/{resource}",
    response_class=Response,
    responses={200: {"model": Released}, **declared(404)},
)
async def force_release(resource: ResourceName, origin: OriginOf) -> Response:
    evicted = await origin.lock.force_release(_resource(resource))
    if evicted is None:
        raise ApiError(404, "not_found", f"{resource!r} is not held", field="resource")
    log.warning(
        "lock %r force-released (holder %s..., fencing %d)",
        resource,
        evicted.token[:8],
        evicted.fencing,
    )
    return JSONResponse(
        {
            "resource": resource,
            "released": True,
            "holder": evicted.token[:8],
            "fencing": evicted.fencing,
        }
    )


@coordination_router.get(
    "/v1/admin/catalog/index",
    response_class=Response,
    responses={200: {"content": {"application/json": {"schema": {"type": "object"}}}}},
)
async def catalog_index(request: Request, origin: OriginOf) -> Response:
    return JSONResponse(await _rebuilder(request, origin).live())


@dataclass
class Rebuilds:
    """What the app keeps of rebuilds: the single-flight runs, the background tasks, and
    why recent ones failed (a failed run leaves no record, so that a retry runs again)."""

    flights: SingleFlight
    running: dict[str, asyncio.Future[JsonValue]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)

    def failed(self, rebuild_id: str, exc: BaseException) -> None:
        self.failures[rebuild_id] = str(exc)
        while len(self.failures) > MAX_FAILURES_KEPT:
            self.failures.pop(next(iter(self.failures)))


MAX_FAILURES_KEPT = 100


@coordination_router.post(
    "/v1/admin/catalog/rebuild",
    response_class=Response,
    responses={
        200: {"model": RebuildStatus, "description": "With `wait=true`: the result"},
        202: {"model": RebuildStatus, "description": "Started; poll `status_url`"},
        **declared(409),
    },
)
async def rebuild(
    request: Request,
    origin: OriginOf,
    wait: bool = False,
    idempotency_key: Annotated[str | None, Header(pattern=RESOURCE.pattern)] = None,
) -> Response:
    rebuild_id = _rebuild_id(idempotency_key)
    rebuilds = _rebuilds(request, origin)
    record = await rebuilds.flights.status(rebuild_id)
    if record is not None and record.status == "done":
        return JSONResponse(_record_json(rebuild_id, record))
    store = writable_store(origin)
    rebuilder = _rebuilder(request, origin)
    rebuilds.failures.pop(rebuild_id, None)
    run = asyncio.ensure_future(
        rebuilds.flights.run(rebuild_id, lambda: rebuild_and_serve(origin, store, rebuilder))
    )
    # Held until it ends (its outcome is then in the flight record); until its record is
    # written, the status endpoint answers from here.
    rebuilds.running.setdefault(rebuild_id, run)

    def finished(task: asyncio.Future[JsonValue]) -> None:
        if rebuilds.running.get(rebuild_id) is task:
            del rebuilds.running[rebuild_id]
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning("catalog rebuild %s failed: %s", rebuild_id, exc)
            rebuilds.failed(rebuild_id, exc)

    run.add_done_callback(finished)
    if not wait:
        return JSONResponse(
            {
                "rebuild_id": rebuild_id,
                "status": "in_progress",
                "status_url": f"/v1/admin/catalog/rebuild/{rebuild_id}",
            },
            status_code=202,
        )
    try:
        await asyncio.shield(run)
    except (CatalogError, CoordinationError) as exc:
        raise ApiError(409, "conflict", str(exc)) from exc
    record = await rebuilds.flights.status(rebuild_id)
    assert record is not None
    return JSONResponse(_record_json(rebuild_id, record))


@coordination_router.get(
    "/v1/admin/catalog/rebuild/{rebuild_id}",
    response_class=Response,
    responses={200: {"model": RebuildStatus}, **declared(404)},
)
async def rebuild_status(rebuild_id: RebuildId, request: Request, origin: OriginOf) -> Response:
    rebuilds = _rebuilds(request, origin)
    record = await rebuilds.flights.status(_rebuild_id(rebuild_id))
    if record is not None:
        return JSONResponse(_record_json(rebuild_id, record))
    if rebuild_id in rebuilds.running:
        return JSONResponse({"rebuild_id": rebuild_id, "status": "in_progress"})
    if rebuild_id in rebuilds.failures:
        return JSONResponse(
            {"rebuild_id": rebuild_id, "status": "failed", "error": rebuilds.failures[rebuild_id]}
        )
    raise ApiError(404, "not_found", "no such rebuild (or its result expired)", field="rebuild_id")


def _rebuild_id(given: str | None) -> str:
    if given is None:
        return uuid.uuid4().hex
    if not RESOURCE.match(given):
        raise ApiError(
            400,
            "invalid_request",
            "1-200 characters: letters, digits and : . _ -",
            field="idempotency-key",
        )
    return given


def _record_json(rebuild_id: str, record: FlightRecord) -> dict[str, object]:
    return {
        "rebuild_id": rebuild_id,
        "status": record.status,
        "started_ms": record.started_ms,
        "finished_ms": record.finished_ms,
        "result": record.result,
        "error": record.error,
    }


def _rebuilder(request: Request, origin: Origin) -> IndexRebuilder:
    vectors = request.app.state.catalog_writer.vectors
    return IndexRebuilder(writable_store(origin), origin.redis, origin.lock, vectors)


def _rebuilds(request: Request, origin: Origin) -> Rebuilds:
    rebuilds: Rebuilds | None = getattr(request.app.state, "rebuilds", None)
    if rebuilds is None:
        rebuilds = Rebuilds(SingleFlight(origin.redis, REBUILDS, clock=origin.clock))
        request.app.state.rebuilds = rebuilds
    return rebuilds


async def rebuild_and_serve(
    origin: Origin, store: VectorStore, rebuilder: IndexRebuilder
) -> dict[str, object]:
    """One rebuild, then this origin serves the new slot: its index swapped in, the
    per-item vectors in Redis refreshed, and the other origins told to reload. The JSON
    result of the single-flight run."""
    result = await rebuilder.rebuild()
    # Taking turns with ingests and deletes: an index read before a delete and swapped in
    # after it would bring the item back (and its vector, below).
    async with origin.catalog_writes:
        mark = await read_mark(origin.redis, store)
        index = await load_index(store, origin.settings.embedding_dim)
        await origin.replace_index(index, mark)
        for start in range(0, len(index.items), VECTOR_WRITE_BATCH):
            async with origin.redis.pipeline(transaction=False) as pipe:
                for row in range(start, min(start + VECTOR_WRITE_BATCH, len(index.items))):
                    item_id = index.items[row].item_id
                    pipe.set(keys.item_vector(item_id), pack_vector(index.vectors[row]))
                await pipe.execute()
        if not await origin.announce_catalog(None):
            # The catalog origin announces its catalog when it starts: a replica left
            # behind catches up then, or at its next gap.
            log.warning("rebuild %s promoted, but the other origins were not told", result.slot)
    return result.to_json()
