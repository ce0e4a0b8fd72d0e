from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest
from redis.asyncio import Redis

from config.settings import Settings
from origin.catalog.ingest import catalog_state, ensure_sample_catalog
from origin.catalog.item_vectors import ItemVectors
from origin.catalog.items import EXTERNAL_CATALOG
from origin.catalog.sample import generate
from origin.catalog.vector_store import VectorStore
from origin.exceptions import VectorStoreError
from protocol import keys
from protocol.vectors import unpack_vector


async def test_ingest_writes_qdrant_and_redis_then_is_a_no_op(
    redis: Redis, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(catalog_size=300, embedding_dim=16)
    progress: list[tuple[int, int]] = []
    done = await ensure_sample_catalog(
        settings, redis, progress=lambda d, t: progress.append((d, t))
    )
    assert done == "ingested"
    assert progress[-1] == (300, 300)
    catalog = generate(300, settings.catalog_seed, 16)

    store = VectorStore.open(settings)
    try:
        assert await store.count_items() == 300
        assert await store.get_item("it-000042") == catalog.items[42]
        batches = [batch async for batch in store.scroll_items(batch=128)]
        loaded = {
            item.item_id: row for items, m in batches for item, row in zip(items, m, strict=False)
        }
        assert np.allclose(loaded["it-000042"], catalog.unified[42], atol=1e-6)
        state = await catalog_state(store, redis, size=300, fingerprint=catalog.fingerprint)
        assert state.current
    finally:
        await store.close()

    raw = await redis.get(keys.item_vector("it-000042"))
    assert raw is not None
    assert np.allclose(unpack_vector(raw, 16), catalog.unified[42])
    assert await ensure_sample_catalog(settings, redis) == "current"


async def test_a_lost_redis_copy_is_restored_without_rewriting_qdrant(
    redis: Redis, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(catalog_size=200, embedding_dim=16)
    await ensure_sample_catalog(settings, redis)
    await redis.flushall()
    assert await ensure_sample_catalog(settings, redis) == "redis"
    assert await redis.exists(keys.item_vector("it-000199")) == 1


@pytest.mark.parametrize(
    "change", [{"catalog_size": 150}, {"catalog_size": 250}, {"embedding_dim": 24}]
)
async def test_another_sample_build_replaces_the_old_one_whole(
    redis: Redis, make_settings: Callable[..., Settings], change: dict[str, int]
) -> None:
    await ensure_sample_catalog(make_settings(catalog_size=200, embedding_dim=16), redis)
    other = make_settings(**{"catalog_size": 200, "embedding_dim": 16, **change})
    assert await ensure_sample_catalog(other, redis) == "ingested"
    store = VectorStore.open(other)
    try:
        assert await store.count_items() == other.catalog_size
        batches = [b async for b in store.scroll_items()]
        assert {m.shape[1] for _, m in batches} == {other.embedding_dim}
    finally:
        await store.close()


@pytest.mark.parametrize("marker", ["", EXTERNAL_CATALOG])
async def test_a_collection_with_items_of_your_own_is_never_replaced(
    redis: Redis, make_settings: Callable[..., Settings], marker: str
) -> None:
    settings = make_settings(catalog_size=100, embedding_dim=16, text_encoder="hashing")
    vectors = ItemVectors.from_settings(settings)
    await ensure_sample_catalog(settings, redis)
    catalog = generate(100, 1, 16, vectors)
    foreign = [
        replace(item, item_id=f"own-{n}", catalog=marker)
        for n, item in enumerate(catalog.items[:10])
    ]
    store = VectorStore.open(settings)
    try:
        await store.upsert_items(
            foreign, {"unified": catalog.unified[:10], "text": catalog.text[:10]}
        )
    finally:
        await store.close()
    recreated = make_settings(catalog_size=200, embedding_dim=16, text_encoder="hashing")
    assert await ensure_sample_catalog(recreated, redis) == "foreign"
    store = VectorStore.open(settings)
    try:
        assert await store.count_items() == 110
    finally:
        await store.close()
    assert await ensure_sample_catalog(recreated, redis, recreate=True) == "ingested"


async def test_a_collection_of_other_vector_sizes_is_refused(
    redis: Redis, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(catalog_size=100, embedding_dim=16, text_encoder="hashing")
    await ensure_sample_catalog(settings, redis)
    store = VectorStore.open(settings)
    try:
        with pytest.raises(VectorStoreError, match=r"'text' vectors of size 512.*makes 384"):
            await store.ensure_items_collection({"text": 384, "image": 16})
        await store.ensure_items_collection(ItemVectors.from_settings(settings).modality_dims)
    finally:
        await store.close()
