"""Items into the catalog: the sample catalog, and catalogs of your own, into Qdrant (the
system of record: payload, unified vector, the modality vectors an item has) and Redis
(``keys.item_vector``: the unified vector the stream workers read per event).

**Catalogs of your own** (``ingest_items``, the admin API's batches): items in,
validated, fused (multi-modal fusion), upserted by id and version. An item is written only when
its ``version`` is higher than the stored one: sending the same batch twice changes
nothing the second time (``unchanged``), an older version never overwrites a newer one
(``skipped``). Qdrant says which version is stored. A batch is checked whole before
anything is written: ``item_problems`` lists every field that is wrong (a vector of the
wrong dimension, all zeros, a repeated item id...); the admin API answers those with a
400. Writes of one process are serialised by the caller (``origin.http.admin``); two
origin processes ingesting the same item at once can interleave.

**The sample catalog** (``ensure_sample_catalog``, ``ingest``): both writes are upserts
by item id, so an interrupted ingest is finished by running it again. The manifest in
Redis is written last and names the sample build that both stores hold. A collection
holding items of your own is never replaced by a sample build.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from config.settings import Settings
from origin.catalog.fusion import MODALITIES, Matrix, fuse
from origin.catalog.item_vectors import ItemVectors
from origin.catalog.items import EXTERNAL_CATALOG, Availability, Item
from origin.catalog.sample import SampleCatalog, fingerprint, generate, item_id_of
from origin.catalog.vector_store import IMAGE, TEXT, UNIFIED, VectorStore
from protocol import keys
from protocol.api import Integer, Number
from protocol.vectors import pack_vector
from redis_client.client import RedisClient

MAX_BATCH = 1000
# Longest vector accepted for any modality; the fusion fixes the real dimension.
MAX_VECTOR_DIM = 8192
# Freshness from age when a batch gives created_at only: as in the sample catalog.
FRESHNESS_DAYS = 90.0

FloatVector = Annotated[list[Number], Field(min_length=1, max_length=MAX_VECTOR_DIM)]


class CatalogItemIn(BaseModel):
    """One item of ``POST /v1/admin/catalog/items``. Vectors are optional per modality;
    without ``text`` the title is encoded by the configured text encoder."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    item_id: str = Field(min_length=1, max_length=200)
    version: Integer = Field(ge=1, le=2**53)
    title: str = Field(min_length=1, max_length=1000)
    category: str = Field(min_length=1, max_length=100, description="category id, a filter key")
    category_name: str | None = Field(default=None, max_length=200, description="default: id")
    brand: str = Field(default="", max_length=200)
    price: Number = Field(ge=0, le=1e9)
    availability: Availability = Availability.IN_STOCK
    popularity: Number = Field(default=0.0, ge=0, le=1)
    freshness: Number | None = Field(default=None, ge=0, le=1, description="default: from age")
    created_at: Integer | None = Field(
        default=None, ge=0, le=2**40, description="epoch seconds; default: now"
    )
    image_url: str = Field(default="", max_length=2000)
    content_type: Literal["physical", "media", "consumable", "apparel", "digital"] = "physical"
    content_length: Literal["short", "medium", "long"] = "medium"
    text: FloatVector | None = None
    image: FloatVector | None = None
    audio: FloatVector | None = None
    video: FloatVector | None = None


@dataclass(frozen=True)
class Problem:
    field: str  # "[3].image": the item's position in the batch, then the field
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"field": self.field, "reason": self.reason}


@dataclass(frozen=True)
class IngestReport:
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0  # the stored version is the same
    skipped: int = 0  # the stored version is newer

    def to_json(self) -> dict[str, int]:
        return {
            "inserted": self.inserted,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "skipped": self.skipped,
        }


@dataclass(frozen=True)
class Written:
    """What an ingest wrote: the report, and the items with their unified vectors."""

    report: IngestReport
    items: list[Item]
    unified: Matrix


def item_problems(items: Sequence[CatalogItemIn], dims: dict[str, int]) -> list[Problem]:
    """Everything wrong with a batch that its schema cannot see: vector dimensions (``dims``:
    modality -> dimension), zero vectors, repeated item ids."""
    problems = []
    first_row: dict[str, int] = {}
    for row, item in enumerate(items):
        seen = first_row.setdefault(item.item_id, row)
        if seen != row:
            problems.append(Problem(f"[{row}].item_id", f"repeats the item at [{seen}]"))
        for modality in MODALITIES:
            vector = getattr(item, modality)
            if vector is None:
                continue
            if len(vector) != dims[modality]:
                reason = f"has {len(vector)} numbers, {modality} vectors have {dims[modality]}"
                problems.append(Problem(f"[{row}].{modality}", reason))
            elif not any(vector):
                problems.append(Problem(f"[{row}].{modality}", "is all zeros"))
    return problems


def plan(
    items: Sequence[CatalogItemIn], stored: dict[str, int]
) -> tuple[list[CatalogItemIn], IngestReport]:
    """The items to write (newer than ``stored``, item id -> version) and the counts."""
    write = [i for i in items if i.version > stored.get(i.item_id, 0)]
    return write, IngestReport(
        inserted=sum(1 for i in write if i.item_id not in stored),
        updated=sum(1 for i in write if i.item_id in stored),
        unchanged=sum(1 for i in items if stored.get(i.item_id) == i.version),
        skipped=sum(1 for i in items if stored.get(i.item_id, 0) > i.version),
    )


def to_item(item: CatalogItemIn, now: float) -> Item:
    created_at = item.created_at if item.created_at is not None else int(now)
    freshness = item.freshness
    if freshness is None:
        age_days = max(0.0, now - created_at) / 86_400
        freshness = math.exp(-age_days / FRESHNESS_DAYS)
    return Item(
        item_id=item.item_id,
        title=item.title,
        category=item.category,
        category_name=item.category_name or item.category,
        brand=item.brand,
        price=item.price,
        availability=item.availability,
        popularity=item.popularity,
        freshness=round(freshness, 6),
        created_at=created_at,
        image_url=item.image_url,
        # Text is always there: computed from the title when not given.
        modalities=tuple(m for m in MODALITIES if m == "text" or getattr(item, m) is not None),
        catalog=EXTERNAL_CATALOG,
        version=item.version,
        content_type=item.content_type,
        content_length=item.content_length,
    )


def modality_vectors(
    items: Sequence[CatalogItemIn], vectors: ItemVectors
) -> tuple[dict[str, Matrix], dict[str, npt.NDArray[np.bool_]]]:
    """Each modality as one matrix (zero rows where absent) and its presence mask; missing
    text vectors are encoded from the titles. CPU work: run it off the event loop."""
    dims = vectors.modality_dims
    matrices: dict[str, Matrix] = {}
    present: dict[str, npt.NDArray[np.bool_]] = {}
    for modality in MODALITIES:
        given = [getattr(item, modality) for item in items]
        mask = np.array([v is not None for v in given], dtype=bool)
        if modality != "text" and not mask.any():
            continue
        matrix = np.zeros((len(items), dims[modality]), dtype=np.float32)
        for row, vector in enumerate(given):
            if vector is not None:
                matrix[row] = vector
        if modality == "text" and not mask.all():
            missing = np.flatnonzero(~mask)
            matrix[missing] = vectors.encoder.encode([items[int(r)].title for r in missing])
            mask[:] = True
        matrices[modality], present[modality] = matrix, mask
    return matrices, present


async def ingest_items(
    items: Sequence[CatalogItemIn],
    *,
    vectors: ItemVectors,
    store: VectorStore,
    redis: RedisClient,
    clock: Callable[[], float] = time.time,
    before_writing: Callable[[], None] = lambda: None,
) -> Written:
    """Write the items newer than what is stored; ``items`` passed ``item_problems``.

    ``before_writing`` is called after the reads and the vectors' fusion (the long part),
    just before the first write; it raises to stop with nothing written (the catalog lock's
    lease lost: ``Heartbeat.check``). Once writing has begun every write is made, the
    store's and Redis's: stopping between them would leave items in the store whose Redis
    vectors a retry would not write (the store's versions say they are current)."""
    stored = await store.versions([item.item_id for item in items])
    write, report = plan(items, stored)
    if not write:
        return Written(report, [], np.empty((0, vectors.dim), dtype=np.float32))
    matrices, present = await asyncio.to_thread(modality_vectors, write, vectors)
    unified = await asyncio.to_thread(fuse, vectors.fusion, matrices, present)
    now = clock()
    written = [to_item(item, now) for item in write]
    before_writing()
    await store.ensure_items_collection(vectors.modality_dims)
    await store.upsert_items(written, {UNIFIED: unified, **matrices}, present)
    async with redis.pipeline(transaction=False) as pipe:
        for row, item in enumerate(written):
            pipe.set(keys.item_vector(item.item_id), pack_vector(unified[row]))
        await pipe.execute()
    return Written(report, written, unified)


# --- the sample catalog ------------------------------------------------------------------

Progress = Callable[[int, int], None]
# What ensure_sample_catalog did; "foreign": the collection holds items of your own, left as is.
SampleOutcome = Literal["current", "redis", "ingested", "foreign"]


@dataclass(frozen=True)
class CatalogState:
    qdrant_current: bool
    redis_current: bool

    @property
    def current(self) -> bool:
        return self.qdrant_current and self.redis_current


async def catalog_state(
    store: VectorStore, redis: RedisClient, *, size: int, fingerprint: str
) -> CatalogState:
    """Whether each store already holds exactly the sample build ``fingerprint``."""
    qdrant_current = False
    if await store.count_items() == size:
        # Items carry the build's fingerprint; the first and last tell a size/seed change.
        first = await store.get_item(item_id_of(0, size))
        last = await store.get_item(item_id_of(size - 1, size))
        qdrant_current = all(i is not None and i.catalog == fingerprint for i in (first, last))
    manifest = await redis.hgetall(keys.CATALOG_MANIFEST)
    redis_current = (
        manifest.get(b"fingerprint") == fingerprint.encode()
        and manifest.get(b"size") == str(size).encode()
    )
    return CatalogState(qdrant_current, redis_current)


async def ingest(
    catalog: SampleCatalog,
    store: VectorStore,
    redis: RedisClient,
    *,
    modality_dims: Mapping[str, int],
    batch: int = 1000,
    qdrant: bool = True,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.time,
) -> None:
    """Upsert every item to Qdrant (unless ``qdrant=False``) and Redis, then the manifest.
    ``modality_dims``: the size of each modality's named vector (``ItemVectors``)."""
    size = len(catalog.items)
    if qdrant:
        await store.ensure_items_collection(modality_dims)
    done = 0
    for start in range(0, size, batch):
        stop = min(size, start + batch)
        if qdrant:
            vectors = {
                UNIFIED: catalog.unified[start:stop],
                TEXT: catalog.text[start:stop],
                IMAGE: catalog.image[start:stop],
            }
            await store.upsert_items(catalog.items[start:stop], vectors)
        async with redis.pipeline(transaction=False) as pipe:
            for row in range(start, stop):
                pipe.set(
                    keys.item_vector(catalog.items[row].item_id), pack_vector(catalog.unified[row])
                )
            await pipe.execute()
        done = stop
        if progress is not None:
            progress(done, size)
    await redis.hset(
        keys.CATALOG_MANIFEST,
        mapping={
            "fingerprint": catalog.fingerprint,
            "size": size,
            "dim": catalog.unified.shape[1],
            "ingested_at": int(clock()),
        },
    )
    # A rebuild that copied the catalog before this must not promote its copy.
    await redis.incr(keys.CATALOG_VERSION)


async def ensure_sample_catalog(
    settings: Settings,
    redis: RedisClient,
    *,
    recreate: bool = False,
    progress: Progress | None = None,
) -> SampleOutcome:
    """Make both stores hold the sample catalog the settings describe.

    Returns what was done: ``"current"`` (nothing), ``"redis"`` (only the Redis copy was
    missing), ``"ingested"``, or ``"foreign"``. Another sample build in Qdrant (other size,
    seed, dimension, text encoder or fusion weights) is replaced whole, so no item of the
    old build lingers; a collection that holds any item of your own (ingested through the
    admin API, or written by another tool) is left as it is: ``"foreign"``, unless
    ``recreate``. Opens and closes Qdrant itself: in local mode the origin can only open the
    path once this is done.
    """
    size, seed, dim = settings.catalog_size, settings.catalog_seed, settings.embedding_dim
    vectors = await asyncio.to_thread(ItemVectors.from_settings, settings)
    store = VectorStore.open(settings)
    try:
        if recreate:
            await store.drop_items_collection()
        state = await catalog_state(
            store, redis, size=size, fingerprint=fingerprint(size, seed, dim, vectors.build_id)
        )
        if state.current:
            return "current"
        if not state.qdrant_current:
            if await store.any_foreign_item() is not None:
                return "foreign"
            await store.drop_items_collection()
        # Generation is CPU work of seconds (the text encoder): keep the loop responsive.
        catalog = await asyncio.to_thread(generate, size, seed, dim, vectors)
        await ingest(
            catalog,
            store,
            redis,
            modality_dims=vectors.modality_dims,
            qdrant=not state.qdrant_current,
            progress=progress,
        )
        return "redis" if state.qdrant_current else "ingested"
    finally:
        await store.close()
