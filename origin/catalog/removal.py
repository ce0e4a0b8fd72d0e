"""Items out of the catalog: the admin API's deletes, and the sample items a catalog of your
own leaves behind at start-up.

Each item goes out of Redis first (``keys.item_vector``: the stream workers stop reading
it), then out of Qdrant, the system of record; a write interrupted in between leaves the
item in Qdrant, where the next attempt finds and deletes it. The callers bump
``catalog:version`` afterwards, so that a rebuild that copied the catalog before builds
again. A delete is not a tombstone: loading the item again brings it back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from origin.catalog.vector_store import VectorStore
from protocol import keys
from redis_client.client import RedisClient

# Sample items deleted per round trip when a catalog of your own replaces them.
DROP_BATCH = 1000


@dataclass(frozen=True, slots=True)
class Removed:
    deleted: list[str]  # were in the catalog, are not any more
    absent: list[str]  # were not in it (never ingested, or deleted before)


async def delete_items(
    item_ids: Sequence[str], *, store: VectorStore, redis: RedisClient
) -> Removed:
    """Delete ``item_ids`` (no repeats) from Redis, then Qdrant."""
    stored = await store.versions(item_ids)
    deleted = [i for i in item_ids if i in stored]
    absent = [i for i in item_ids if i not in stored]
    if deleted:
        await redis.delete(*(keys.item_vector(i) for i in deleted))
        await store.delete_items(deleted)
    return Removed(deleted, absent)


async def drop_sample_items(store: VectorStore, redis: RedisClient) -> int:
    """Delete every item a sample build wrote, keep the others; the number deleted."""
    ids = await store.sample_item_ids()
    for start in range(0, len(ids), DROP_BATCH):
        batch = ids[start : start + DROP_BATCH]
        await redis.delete(*(keys.item_vector(i) for i in batch))
        await store.delete_items(batch)
    await redis.delete(keys.CATALOG_MANIFEST)
    if ids:
        await redis.incr(keys.CATALOG_VERSION)
    return len(ids)
