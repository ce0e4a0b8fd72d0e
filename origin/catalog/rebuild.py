"""Blue-green rebuild of the catalog index: build a new slot off the lock, promote it under
the lock, clean up after the release (blue-green slots, the short critical section).

1. **Build, off the lock.** Note the live slot and the catalog version (``catalog:version``,
   bumped by every ingest under the catalog lock), then copy every item of the live slot
   into a new slot ``items__r<n>``, its unified vector fused again with the current
   ``PERSO_FUSION_WEIGHTS`` (and its text vector encoded again when the text encoder
   changed size). Minutes for a big catalog; nobody waits for it.
2. **Promote, under the lock** ``catalog-index``: check that neither the live slot nor the
   catalog version moved since step 1 (a compare-and-swap, the short critical section's
   pointer re-read; an ingest in between means the copy misses it, so the build starts
   again), record the new slot in the fenced pointer ``catalog:index`` with the lease's
   fencing token, and switch the ``items`` alias. A holder paused past its lease finds its
   token refused by the pointer and promotes nothing.
3. **After the release**: drop the slots older than the one promoted, swap the new index into
   this origin and refresh the per-item vectors in Redis.

A rebuild is idempotent per request key (``coordination.single_flight``): a retried
``POST /v1/admin/catalog/rebuild`` with the same key gets the first run's result, and
concurrent ones share a single run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from coordination.exceptions import StaleFencingToken
from coordination.fencing import FencedPointer
from coordination.lock import Lock, RetryPolicy, locked
from origin.catalog.fusion import MODALITIES, Matrix, fuse
from origin.catalog.item_vectors import ItemVectors
from origin.catalog.items import Item
from origin.catalog.vector_store import UNIFIED, VectorStore, slot_name, slot_number
from origin.exceptions import CatalogError
from protocol import keys
from redis_client.client import RedisClient

log = logging.getLogger(__name__)

CATALOG_RESOURCE = "catalog-index"
# The promotion is two reads, a pointer write and an alias switch: well under a second.
PROMOTE_TTL_MS = 30_000
PROMOTE_RETRY = RetryPolicy(attempts=20, base_delay_s=0.05, max_delay_s=1.0)
# Builds started again because an ingest landed during the copy, before giving up.
MAX_BUILDS = 3
VECTOR_WRITE_BATCH = 1000


class RebuildConflict(CatalogError):
    """The catalog kept changing during every build, or a newer rebuild won."""


@dataclass(frozen=True, slots=True)
class RebuildResult:
    slot: str
    previous: str
    items: int
    builds: int  # 1 unless an ingest during the copy made it start again
    build_ms: float
    promote_ms: float  # time under the lock
    fencing: int
    dropped: list[str]

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def refuse(
    items: Sequence[Item], named: Sequence[dict[str, list[float]]], vectors: ItemVectors
) -> tuple[Matrix, dict[str, Matrix], dict[str, np.ndarray]]:
    """The unified vectors of ``items`` fused again from their stored modality vectors with
    ``vectors``' fusion; text vectors of another size are encoded again from the titles.
    CPU work: run it off the event loop. Raises ``CatalogError`` for a stored modality
    vector the fusion cannot take."""
    dims = vectors.modality_dims
    matrices: dict[str, Matrix] = {}
    present: dict[str, np.ndarray] = {}
    for modality in MODALITIES:
        rows = [point.get(modality) for point in named]
        mask = np.array([row is not None for row in rows], dtype=bool)
        if modality != "text" and not mask.any():
            continue
        if modality not in dims:
            raise CatalogError(f"items hold {modality!r} vectors and the fusion takes none")
        matrix = np.zeros((len(items), dims[modality]), dtype=np.float32)
        stale: list[int] = []
        for i, row in enumerate(rows):
            if row is not None and len(row) == dims[modality]:
                matrix[i] = row
            elif modality == "text":  # missing, or made by another encoder
                stale.append(i)
            elif row is not None:
                raise CatalogError(
                    f"item {items[i].item_id!r} has {modality} vectors of size {len(row)}, "
                    f"the fusion takes {dims[modality]}"
                )
        if stale:  # text only: encode the titles with the current encoder
            matrix[stale] = vectors.encoder.encode([items[i].title for i in stale])
            mask[stale] = True
        matrices[modality], present[modality] = matrix, mask
    return fuse(vectors.fusion, matrices, present), matrices, present


class IndexRebuilder:
    def __init__(
        self,
        store: VectorStore,
        redis: RedisClient,
        lock: Lock,
        vectors: ItemVectors,
        *,
        perf: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._store = store
        self._redis = redis
        self._lock = lock
        self._vectors = vectors
        self._pointer = FencedPointer(redis, keys.CATALOG_INDEX)
        self._perf = perf

    async def live(self) -> dict[str, object]:
        """What is live: the slot ``items`` names, the pointer's record, the version."""
        recorded = await self._pointer.read()
        version = await self._redis.get(keys.CATALOG_VERSION)
        return {
            "slot": await self._store.items_slot(),
            "recorded_slot": recorded.value.decode() if recorded else None,
            "fencing": recorded.fencing if recorded else None,
            "catalog_version": int(version or 0),
            "slots": await self._store.item_slots(),
        }

    async def rebuild(self) -> RebuildResult:
        started = self._perf()
        for build in range(1, MAX_BUILDS + 1):
            source = await self._store.items_slot()
            if source is None:
                raise CatalogError("no catalog to rebuild: ingest one first")
            version = await self._version()
            slot = slot_name(int(await self._redis.incr(keys.CATALOG_REBUILD_SEQ)))
            count = await self._build(source, slot)
            build_ms = (self._perf() - started) * 1000
            promoted = await self._promote(source, version, slot)
            if promoted is None:
                log.info("catalog changed during build %d of %s; building again", build, slot)
                await self._store.drop_collection(slot)
                continue
            fencing, promote_ms = promoted
            dropped = await self._drop_older(slot)
            return RebuildResult(slot, source, count, build, build_ms, promote_ms, fencing, dropped)
        raise RebuildConflict(f"the catalog changed during each of {MAX_BUILDS} builds")

    async def _version(self) -> int:
        return int(await self._redis.get(keys.CATALOG_VERSION) or 0)

    async def _build(self, source: str, slot: str) -> int:
        await self._store.ensure_items_collection(self._vectors.modality_dims, slot)
        count = 0
        async for items, named in self._store.scroll_points(source):
            unified, matrices, present = await asyncio.to_thread(
                refuse, items, named, self._vectors
            )
            await self._store.upsert_items(
                items, {UNIFIED: unified, **matrices}, present, collection=slot
            )
            count += len(items)
        return count

    async def _promote(self, source: str, version: int, slot: str) -> tuple[int, float] | None:
        """Under the lock: the compare, the fenced record, the alias. None on drift."""
        async with locked(
            self._lock, CATALOG_RESOURCE, PROMOTE_TTL_MS, retry=PROMOTE_RETRY
        ) as lease:
            began = self._perf()
            await self._pointer.read_as(lease.fencing)  # older holders are refused from now
            if await self._store.items_slot() != source or await self._version() != version:
                return None
            if not await self._pointer.write(slot, lease.fencing):
                raise StaleFencingToken(keys.CATALOG_INDEX, lease.fencing)
            await self._store.promote(slot)
            return lease.fencing, (self._perf() - began) * 1000

    async def _drop_older(self, slot: str) -> list[str]:
        live = slot_number(slot)
        assert live is not None
        older = [s for s in await self._store.item_slots() if (slot_number(s) or 0) < live]
        for name in older:
            await self._store.drop_collection(name)
        return older
