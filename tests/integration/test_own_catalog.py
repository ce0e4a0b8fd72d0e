"""Catalogs of your own from the start (``PERSO_CATALOG=empty`` or a file) and deletes through
the admin API: the real origin app over the suite's Redis and Qdrant local mode."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from config.settings import Settings
from coordination.exceptions import LeaseLost
from coordination.lock import locked
from origin.app import Origin, create_app
from origin.catalog.ingest import CatalogItemIn, ensure_sample_catalog, ingest_items
from origin.catalog.item_vectors import ItemVectors
from origin.catalog.own_catalog import start_own_catalog
from origin.catalog.rebuild import CATALOG_RESOURCE
from origin.catalog.vector_store import VectorStore
from origin.exceptions import CatalogFileError
from protocol import keys
from sync.codec import decode_entry
from sync.messages import ItemsChanged, ItemUpdate, Message
from tests.apps import serving

TOKEN = "own-catalog-admin-token"
ADMIN = {"authorization": f"Bearer {TOKEN}"}
REGIONS = ("us-east", "eu-west")


def own_item(item_id: str, version: int = 1, **fields: Any) -> dict[str, Any]:
    return {
        "item_id": item_id,
        "version": version,
        "title": f"Trailborn Ultralight Tent {item_id}",
        "category": "sports-outdoors",
        "price": 149.0,
        **fields,
    }


def write_file(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines))
    return path


@pytest.fixture
def own_settings(redis_url: str, make_settings: Callable[..., Settings]) -> Callable[..., Settings]:
    def make(catalog: str = "empty", **overrides: Any) -> Settings:
        return make_settings(
            redis_url=redis_url,
            event_partitions=4,
            admin_token=TOKEN,
            text_encoder="hashing",
            regions=REGIONS,
            catalog=catalog,
            **overrides,
        )

    return make


@pytest.fixture
async def empty_origin(
    own_settings: Callable[..., Settings], redis: Redis
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    settings = own_settings()
    await start_own_catalog(settings, redis)
    app = create_app(settings)
    async with serving(app, "http://origin") as client:
        yield app, client


def origin_of(app: FastAPI) -> Origin:
    origin: Origin = app.state.origin
    return origin


async def personalize(client: httpx.AsyncClient, **constraints: Any) -> httpx.Response:
    body = {
        "user_id": "u-1",
        "context": {"page_type": "home", "device": "mobile"},
        "constraints": constraints,
        "options": {"include_explanation": True},
    }
    return await client.post("/v1/personalize", json=body)


async def stored_ids(settings: Settings) -> set[str]:
    store = VectorStore.open(settings)
    try:
        return {
            item.item_id for items, _ in [b async for b in store.scroll_items()] for item in items
        }
    finally:
        await store.close()


async def messages_in(redis: Redis, region: str) -> list[Message]:
    """The region's sync messages but the catalog changes announced for the edges' item
    vectors (``ItemsChanged``: at every catalog write and origin start; tested in
    ``test_admin_catalog`` and ``test_edge_own_candidates``)."""
    entries = await redis.xrange(keys.edge_sync_stream(region))
    messages = [decode_entry(fields)[0].message for _, fields in entries]
    return [m for m in messages if not isinstance(m, ItemsChanged)]


# --- an empty catalog ---------------------------------------------------------------------


async def test_an_empty_catalog_is_served_with_no_items_then_with_the_first_ones(
    empty_origin: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = empty_origin
    assert (await client.get("/readyz")).status_code == 200
    for constraints in ({}, {"categories": ["books"]}, {"price_range": {"max": 10.0}}):
        answer = await personalize(client, **constraints)
        assert answer.status_code == 200, answer.text
        assert answer.json()["items"] == []
        assert answer.json()["metadata"]["degraded"] is False
    added = await client.post("/v1/admin/catalog/items", json=[own_item("sku-1")], headers=ADMIN)
    assert added.json()["catalog_items"] == 1
    answer = await personalize(client)
    assert [i["item_id"] for i in answer.json()["items"]] == ["sku-1"]


async def test_a_swap_during_a_request_does_not_change_its_index(
    empty_origin: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = empty_origin
    items = [own_item(f"sku-{n}") for n in range(30)]
    assert (await client.post("/v1/admin/catalog/items", json=items, headers=ADMIN)).is_success
    ids = [f"sku-{n}" for n in range(30)]
    deletes = [
        client.post("/v1/admin/catalog/items:delete", json={"item_ids": ids[n::3]}, headers=ADMIN)
        for n in range(3)
    ]
    answers = await asyncio.gather(*(personalize(client) for _ in range(20)), *deletes)
    for answer in answers:
        assert answer.status_code == 200, answer.text
    assert len(origin_of(app).index) == 0


# --- deletes ------------------------------------------------------------------------------


async def test_a_delete_takes_the_item_out_of_every_store_and_tells_every_region(
    empty_origin: tuple[FastAPI, httpx.AsyncClient], redis: Redis, own_settings: Any
) -> None:
    app, client = empty_origin
    items = [own_item("sku-1"), own_item("sku-2"), own_item("sku-3")]
    assert (await client.post("/v1/admin/catalog/items", json=items, headers=ADMIN)).is_success
    version = int(await redis.get(keys.CATALOG_VERSION) or 0)

    one = await client.delete("/v1/admin/catalog/items/sku-1", headers=ADMIN)
    assert one.status_code == 200, one.text
    assert {k: one.json()[k] for k in ("deleted", "absent", "catalog_items")} == {
        "deleted": ["sku-1"],
        "absent": [],
        "catalog_items": 2,
    }
    many = await client.post(
        "/v1/admin/catalog/items:delete",
        json={"item_ids": ["sku-2", "sku-1", "never-there", "sku-2"]},
        headers=ADMIN,
    )
    assert many.status_code == 200, many.text
    assert (many.json()["deleted"], many.json()["absent"]) == (["sku-2"], ["sku-1", "never-there"])
    assert many.json()["catalog_items"] == 1

    index = origin_of(app).index
    assert set(index.row_of) == {"sku-3"}
    assert await redis.get(keys.item_vector("sku-1")) is None
    assert await redis.get(keys.item_vector("sku-3")) is not None
    assert int(await redis.get(keys.CATALOG_VERSION) or 0) == version + 2
    answer = await personalize(client)
    assert [i["item_id"] for i in answer.json()["items"]] == ["sku-3"]
    removed = [ItemUpdate(i, in_stock=False, price=None, removed=True) for i in ("sku-1",)]
    again = [
        ItemUpdate(i, in_stock=False, price=None, removed=True)
        for i in ("sku-2", "sku-1", "never-there")
    ]
    for region in REGIONS:
        # every id named is announced, absent ones too: a retry finishes an earlier call
        assert (await messages_in(redis, region))[-4:] == removed + again
    # an unknown id is no error: retries are harmless
    retry = await client.delete("/v1/admin/catalog/items/sku-1", headers=ADMIN)
    assert (retry.status_code, retry.json()["absent"]) == (200, ["sku-1"])


async def test_a_deleted_item_stays_deleted_after_a_restart(
    own_settings: Callable[..., Settings], redis: Redis
) -> None:
    settings = own_settings()
    await start_own_catalog(settings, redis)
    async with serving(create_app(settings), "http://origin") as client:
        items = [own_item("sku-1"), own_item("sku-2")]
        await client.post("/v1/admin/catalog/items", json=items, headers=ADMIN)
        await client.delete("/v1/admin/catalog/items/sku-1", headers=ADMIN)
    assert await stored_ids(settings) == {"sku-2"}
    app = create_app(settings)
    async with serving(app, "http://origin"):
        assert set(origin_of(app).index.row_of) == {"sku-2"}


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({"item_ids": []}, "item_ids", "at least 1"),
        ({"item_ids": [f"x{n}" for n in range(1001)]}, "item_ids", "at most 1000"),
        ({"item_ids": [""]}, "item_ids[0]", "at least 1"),
        ({"item_ids": ["a" * 201]}, "item_ids[0]", "at most 200"),
        ({"item_ids": "sku-1"}, "item_ids", "valid array"),
        ({}, "item_ids", "required"),
        ({"item_ids": ["a"], "soft": True}, "soft", "not permitted"),
    ],
)
async def test_bad_deletes_are_a_400_naming_the_field(
    empty_origin: tuple[FastAPI, httpx.AsyncClient], body: Any, field: str, reason: str
) -> None:
    _, client = empty_origin
    response = await client.post("/v1/admin/catalog/items:delete", json=body, headers=ADMIN)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field
    assert reason in response.json()["reason"]


async def test_deletes_need_the_admin_token(
    empty_origin: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = empty_origin
    wrong = {"authorization": "Bearer wrong"}
    assert (await client.delete("/v1/admin/catalog/items/a", headers=wrong)).status_code == 401
    response = await client.post(
        "/v1/admin/catalog/items:delete", json={"item_ids": ["a"]}, headers=wrong
    )
    assert response.status_code == 401


async def test_a_delete_while_a_promotion_holds_the_lock_is_a_409_and_deletes_nothing(
    empty_origin: tuple[FastAPI, httpx.AsyncClient], redis: Redis
) -> None:
    app, client = empty_origin
    await client.post("/v1/admin/catalog/items", json=[own_item("sku-1")], headers=ADMIN)
    origin = origin_of(app)
    async with locked(origin.lock, CATALOG_RESOURCE, 30_000):
        response = await client.delete("/v1/admin/catalog/items/sku-1", headers=ADMIN)
    assert response.status_code == 409, response.text
    assert response.headers["retry-after"] == "1"
    assert "sku-1" in origin.index.row_of
    assert await redis.get(keys.item_vector("sku-1")) is not None


async def test_a_delete_that_cannot_tell_the_edges_is_a_503_and_its_retry_finishes(
    empty_origin: tuple[FastAPI, httpx.AsyncClient], redis: Redis
) -> None:
    app, client = empty_origin
    await client.post("/v1/admin/catalog/items", json=[own_item("sku-1")], headers=ADMIN)
    origin = origin_of(app)
    publisher = origin.publisher
    # A publisher for a region whose stream key holds a string: every XADD fails.
    await redis.set(keys.edge_sync_stream("us-east"), "not a stream")
    response = await client.delete("/v1/admin/catalog/items/sku-1", headers=ADMIN)
    assert response.status_code == 503, response.text
    assert "retry" in response.json()["reason"]
    assert "sku-1" not in origin.index.row_of  # out of the catalog all the same
    await redis.delete(keys.edge_sync_stream("us-east"))
    retry = await client.delete("/v1/admin/catalog/items/sku-1", headers=ADMIN)
    assert (retry.status_code, retry.json()["absent"]) == (200, ["sku-1"])
    assert (await messages_in(redis, "us-east"))[-1] == ItemUpdate("sku-1", False, None, True)
    assert publisher is origin.publisher


# --- starting from a file, dropping sample items -------------------------------------------


async def test_sample_items_are_dropped_at_start_and_items_of_your_own_kept(
    own_settings: Callable[..., Settings], redis: Redis
) -> None:
    sample = own_settings("sample")
    assert await ensure_sample_catalog(sample, redis) == "ingested"
    async with serving(create_app(sample), "http://origin") as client:
        await client.post("/v1/admin/catalog/items", json=[own_item("sku-1")], headers=ADMIN)
        renamed = [own_item("it-000003", 2)]  # an update makes a sample item one of yours
        await client.post("/v1/admin/catalog/items", json=renamed, headers=ADMIN)
    started = await start_own_catalog(own_settings("empty"), redis)
    assert (started.dropped, started.items) == (499, 2)
    assert await stored_ids(sample) == {"sku-1", "it-000003"}
    assert await redis.get(keys.item_vector("it-000001")) is None
    assert await redis.get(keys.item_vector("sku-1")) is not None
    assert not await redis.exists(keys.CATALOG_MANIFEST)
    again = await start_own_catalog(own_settings("empty"), redis)
    assert (again.dropped, again.items) == (0, 2)


async def test_a_file_is_loaded_in_batches_add_and_update_only(
    own_settings: Callable[..., Settings], redis: Redis, tmp_path: Path
) -> None:
    lines = [own_item(f"sku-{n}") for n in range(2500)]
    path = write_file(tmp_path / "items.jsonl", [*lines[:1200], "", *lines[1200:]])
    settings = own_settings(str(path))
    seen: list[tuple[int, int]] = []
    first = await start_own_catalog(settings, redis, progress=lambda d, t: seen.append((d, t)))
    assert (first.loaded.inserted, first.items) == (2500, 2500)
    assert seen == [(1000, 2500), (2000, 2500), (2500, 2500)]
    # a second run (or one finishing an interrupted load) writes only what changed; items
    # absent from the file stay
    write_file(path, [own_item("sku-0", 2, price=99.0), own_item("sku-new")])
    second = await start_own_catalog(settings, redis)
    assert (second.loaded.updated, second.loaded.inserted, second.items) == (1, 1, 2501)
    app = create_app(settings)
    async with serving(app, "http://origin"):
        index = origin_of(app).index
        assert len(index) == 2501
        assert index.items[index.row_of["sku-0"]].price == 99.0


async def test_a_bad_file_is_refused_by_line_and_field_and_nothing_is_written(
    own_settings: Callable[..., Settings], redis: Redis, tmp_path: Path
) -> None:
    sample = own_settings("sample")
    await ensure_sample_catalog(sample, redis)
    lines: list[Any] = [own_item("sku-1"), "not json", own_item("sku-2", price=-1)]
    lines += [own_item("sku-1")] + [{"item_id": f"x{n}"} for n in range(30)]
    path = write_file(tmp_path / "bad.jsonl", lines)
    with pytest.raises(CatalogFileError) as refused:
        await start_own_catalog(own_settings(str(path)), redis)
    text = str(refused.value)
    assert "line 2: not JSON" in text
    assert "line 3, price: Input should be greater than or equal to 0" in text
    assert "line 4, item_id: repeats the item of line 1" in text
    assert "more problems" in text
    # the sample items are all still there, nothing of the file is
    assert len(await stored_ids(sample)) == 500
    assert await redis.get(keys.item_vector("sku-1")) is None


@pytest.mark.parametrize(
    ("content", "reason"),
    [(None, "cannot read"), ("\n\n", "holds no items")],
)
async def test_a_missing_or_empty_file_is_refused(
    own_settings: Callable[..., Settings],
    redis: Redis,
    tmp_path: Path,
    content: str | None,
    reason: str,
) -> None:
    path = tmp_path / "items.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(CatalogFileError, match=reason):
        await start_own_catalog(own_settings(str(path)), redis)


async def test_an_ingest_whose_lease_was_lost_writes_nothing(
    own_settings: Callable[..., Settings], redis: Redis
) -> None:
    """The catalog lock's lease lost while the batch was read and its vectors fused (the
    heartbeat's ``check`` raises): the ingest stops before its first write, and the same
    batch retried is written whole."""
    settings = own_settings()
    await start_own_catalog(settings, redis)
    vectors = await asyncio.to_thread(ItemVectors.from_settings, settings)
    store = VectorStore.open(settings)
    batch = [CatalogItemIn.model_validate(own_item(f"sku-lease-{n}")) for n in range(3)]

    def lost() -> None:
        raise LeaseLost(CATALOG_RESOURCE)

    try:
        with pytest.raises(LeaseLost):
            await ingest_items(
                batch, vectors=vectors, store=store, redis=redis, before_writing=lost
            )
        assert await store.count_items() == 0
        assert not await redis.exists(keys.item_vector("sku-lease-0"))
        written = await ingest_items(batch, vectors=vectors, store=store, redis=redis)
        assert written.report.inserted == 3
        assert await store.count_items() == 3
        assert await redis.exists(keys.item_vector("sku-lease-0"))
    finally:
        await store.close()
