"""Writing the sample catalog: item vectors and metadata to Qdrant, unified vectors to Redis.

Qdrant holds the catalog; Redis holds the copy of each unified vector that the stream
workers read per event (``item:{id}:vec``). Both writes are upserts by item id, so an
interrupted ingest is finished by running it again. The manifest in Redis is written last
and names the catalog build that both stores hold. Catalogs of your own come in through
the admin API instead (origin.catalog_ingest); a collection holding such items is never
replaced by a sample build.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from redis.asyncio import Redis

from origin.item_vectors import ItemVectors
from origin.sample_catalog import SampleCatalog, fingerprint, generate, item_id_of
from origin.vector_store import IMAGE, TEXT, UNIFIED, VectorStore
from perso.settings import Settings
from protocol import keys
from protocol.vectors import pack_vector

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
    store: VectorStore, redis: Redis, *, size: int, fingerprint: str
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
    redis: Redis,
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
    redis: Redis,
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
