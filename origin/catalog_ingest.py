"""Catalogs of your own: items in, validated, fused (Algorithm 3), upserted by id and version.

An item is written only when its ``version`` is higher than the stored one: sending the
same batch twice changes nothing the second time (``unchanged``), an older version never
overwrites a newer one (``skipped``). Qdrant, the system of record, says which version is
stored. Each written item goes to Qdrant (payload, unified vector and the modality vectors
it has) and its unified vector to Redis (``keys.item_vector``) for the stream workers.

A batch is checked whole before anything is written: ``item_problems`` lists every field
that is wrong (a vector of the wrong dimension, all zeros, a repeated item id...); the
admin API answers those with a 400. Writes of one process are serialised by the caller
(origin.admin); two origin processes ingesting the same item at once can interleave.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field
from redis.asyncio import Redis

from origin.catalog import EXTERNAL_CATALOG, Availability, Item
from origin.fusion import MODALITIES, Matrix, fuse
from origin.item_vectors import ItemVectors
from origin.vector_store import UNIFIED, VectorStore
from protocol import keys
from protocol.vectors import pack_vector

MAX_BATCH = 1000
# Longest vector accepted for any modality; the fusion fixes the real dimension.
MAX_VECTOR_DIM = 8192
# Freshness from age when a batch gives created_at only: as in the sample catalog.
FRESHNESS_DAYS = 90.0

FloatVector = Annotated[list[float], Field(min_length=1, max_length=MAX_VECTOR_DIM)]


class CatalogItemIn(BaseModel):
    """One item of ``POST /v1/admin/catalog/items``. Vectors are optional per modality;
    without ``text`` the title is encoded by the configured text encoder."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    item_id: str = Field(min_length=1, max_length=200)
    version: int = Field(ge=1, le=2**53)
    title: str = Field(min_length=1, max_length=1000)
    category: str = Field(min_length=1, max_length=100, description="category id, a filter key")
    category_name: str | None = Field(default=None, max_length=200, description="default: id")
    brand: str = Field(default="", max_length=200)
    price: float = Field(ge=0, le=1e9)
    availability: Availability = Availability.IN_STOCK
    popularity: float = Field(default=0.0, ge=0, le=1)
    freshness: float | None = Field(default=None, ge=0, le=1, description="default: from age")
    created_at: int | None = Field(
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
    redis: Redis,
    clock: Callable[[], float] = time.time,
) -> Written:
    """Write the items newer than what is stored; ``items`` passed ``item_problems``."""
    stored = await store.versions([item.item_id for item in items])
    write, report = plan(items, stored)
    if not write:
        return Written(report, [], np.empty((0, vectors.dim), dtype=np.float32))
    matrices, present = await asyncio.to_thread(modality_vectors, write, vectors)
    unified = await asyncio.to_thread(fuse, vectors.fusion, matrices, present)
    now = clock()
    written = [to_item(item, now) for item in write]
    await store.ensure_items_collection(vectors.modality_dims)
    await store.upsert_items(written, {UNIFIED: unified, **matrices}, present)
    async with redis.pipeline(transaction=False) as pipe:
        for row, item in enumerate(written):
            pipe.set(keys.item_vector(item.item_id), pack_vector(unified[row]))
        await pipe.execute()
    return Written(report, written, unified)
