from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from config.settings import Settings
from origin.app import Origin, create_app
from origin.catalog.ingest import ensure_sample_catalog
from perso.catalog_load import LoadError, load
from protocol import keys
from protocol.vectors import unpack_vector
from sync.codec import decode_entry
from sync.messages import ItemsChanged, PurgeTag
from tests.apps import serving

TOKEN = "admin-secret"
ADMIN = {"authorization": f"Bearer {TOKEN}"}
DIM = 32


def new_item(item_id: str, version: int = 1, **fields: Any) -> dict[str, Any]:
    return {
        "item_id": item_id,
        "version": version,
        "title": "Aurora Noise Cancelling Headphones",
        "category": "electronics",
        "category_name": "Electronics",
        "brand": "Aurora",
        "price": 129.99,
        "popularity": 0.4,
        "content_type": "physical",
        "content_length": "medium",
        **fields,
    }


@pytest.fixture
async def admin_settings(
    redis: Redis, redis_url: str, make_settings: Callable[..., Settings]
) -> Settings:
    settings = make_settings(
        redis_url=redis_url,
        event_partitions=4,
        admin_token=TOKEN,
        embedding_dim=DIM,
        # Feature hashing keeps these tests fast; tests/unit covers the MiniLM encoder.
        text_encoder="hashing",
    )
    await ensure_sample_catalog(settings, redis)
    return settings


@pytest.fixture
async def app(admin_settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    application = create_app(admin_settings)
    async with serving(application, "http://origin") as client:
        yield application, client


def origin_of(app: FastAPI) -> Origin:
    origin: Origin = app.state.origin
    return origin


async def post(client: httpx.AsyncClient, items: Any, **kw: Any) -> httpx.Response:
    headers = kw.pop("headers", ADMIN)
    return await client.post("/v1/admin/catalog/items", json=items, headers=headers, **kw)


async def test_ingest_is_idempotent_by_id_and_version(
    app: tuple[FastAPI, httpx.AsyncClient], redis: Redis
) -> None:
    application, client = app
    image = np.random.default_rng(1).standard_normal(DIM).tolist()
    batch = [new_item("sku-1", image=image), new_item("sku-2", content_type="media")]

    first = await post(client, batch)
    assert first.status_code == 200, first.text
    counts = {k: first.json()[k] for k in ("inserted", "updated", "unchanged", "skipped")}
    assert counts == {"inserted": 2, "updated": 0, "unchanged": 0, "skipped": 0}
    assert first.json()["catalog_items"] == 502
    index = origin_of(application).index
    row = index.row_of["sku-1"]
    assert index.items[row].modalities == ("text", "image")
    assert index.items[index.row_of["sku-2"]].content_type == "media"
    raw = await redis.get(keys.item_vector("sku-1"))
    assert raw is not None
    assert np.allclose(unpack_vector(raw, DIM), index.vectors[row], atol=1e-6)
    assert np.isclose(np.linalg.norm(index.vectors[row]), 1.0, atol=1e-5)

    again = (await post(client, batch)).json()
    assert (again["inserted"], again["unchanged"]) == (0, 2)

    older = (await post(client, [new_item("sku-1", 1), new_item("sku-2", 1)])).json()
    assert older["unchanged"] == 2
    newer = [new_item("sku-1", 2, title="Aurora Studio Headphones", price=99.0)]
    assert (await post(client, newer)).json()["updated"] == 1
    stale = (await post(client, [new_item("sku-1", 1)])).json()
    assert (stale["skipped"], stale["updated"]) == (1, 0)

    index = origin_of(application).index
    item = index.items[index.row_of["sku-1"]]
    assert (item.version, item.title, item.price) == (2, "Aurora Studio Headphones", 99.0)
    assert item.modalities == ("text",)  # the new version has no image
    assert len(index) == 502


async def test_an_update_of_a_sample_item_is_visible(
    app: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    application, client = app
    answer = await post(client, [new_item("it-000003", 2, title="Renamed")])
    assert answer.json()["updated"] == 1
    index = origin_of(application).index
    assert index.items[index.row_of["it-000003"]].title == "Renamed"
    assert len(index) == 500


async def test_restarting_keeps_ingested_items(admin_settings: Settings, redis: Redis) -> None:
    application = create_app(admin_settings)
    async with serving(application, "http://origin") as client:
        assert (await post(client, [new_item("sku-9")])).json()["inserted"] == 1
    assert await ensure_sample_catalog(admin_settings, redis) == "foreign"
    application = create_app(admin_settings)
    async with serving(application, "http://origin"):
        index = origin_of(application).index
        assert len(index) == 501
        assert "sku-9" in index.row_of


@pytest.mark.parametrize(
    "headers",
    [{}, {"authorization": "Bearer wrong"}, {"authorization": TOKEN}],
    ids=["missing", "wrong", "not-bearer"],
)
async def test_the_admin_token_is_required(
    app: tuple[FastAPI, httpx.AsyncClient], headers: dict[str, str]
) -> None:
    _, client = app
    response = await post(client, [new_item("sku-1")], headers=headers)
    assert response.status_code == 401
    assert response.json()["field"] == "authorization"
    # even a malformed body gets a 401 first
    assert (await post(client, {"not": "a list"}, headers=headers)).status_code == 401


async def test_without_a_configured_admin_token_the_api_is_closed(
    redis: Redis, redis_url: str, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(redis_url=redis_url, embedding_dim=DIM, text_encoder="hashing")
    await ensure_sample_catalog(settings, redis)
    async with serving(create_app(settings), "http://origin") as client:
        response = await post(client, [new_item("sku-1")])
    assert response.status_code == 401
    assert "PERSO_ADMIN_TOKEN" in response.json()["reason"]


@pytest.mark.parametrize(
    ("content", "field", "reason"),
    [
        (
            [new_item("a"), new_item("b", image=[0.5] * (DIM - 1))],
            "[1].image",
            f"has {DIM - 1} numbers, image vectors have {DIM}",
        ),
        ([new_item("a", text=[1.0] * 7)], "[0].text", "text vectors have 512"),
        ([new_item("a", audio=[0.0] * DIM)], "[0].audio", "all zeros"),
        (b'[{"item_id": "a", "version": 1, "title": "t", "category": "c", "price": 1, '
         b'"video": [0.1, NaN]}]', "[0].video[1]", "finite"),
        ([new_item("a"), new_item("a", 2)], "[1].item_id", "repeats the item at [0]"),
        ([new_item("a", price=-3)], "[0].price", "greater than or equal to 0"),
        ([new_item("a", content_type="food")], "[0].content_type", "physical"),
        ([], "body", "at least 1"),
        ([new_item(f"x{n}") for n in range(1001)], "body", "at most 1000"),
        ({"items": []}, "body", "valid array"),
    ],
)  # fmt: skip
async def test_bad_items_are_a_400_naming_the_field_and_nothing_is_written(
    app: tuple[FastAPI, httpx.AsyncClient],
    content: Any,
    field: str,
    reason: str,
) -> None:
    application, client = app
    if isinstance(content, bytes):
        response = await client.post(
            "/v1/admin/catalog/items",
            content=content,
            headers={**ADMIN, "content-type": "application/json"},
        )
    else:
        response = await post(client, content)
    assert response.status_code == 400, response.text
    problem = response.json()
    assert problem["field"] == field
    assert reason in problem["reason"]
    assert len(origin_of(application).index) == 500


async def test_the_cli_loader_streams_a_file_in_batches(
    app: tuple[FastAPI, httpx.AsyncClient], tmp_path: Path
) -> None:
    application, client = app
    lines = [
        json.dumps(new_item("f-1")),
        json.dumps(new_item("f-2")),
        "not json",
        "",
        json.dumps(new_item("f-3", image=[1.0] * 3)),  # refused: its batch is rejected whole
        json.dumps(new_item("f-4")),
        json.dumps(new_item("f-5")),
    ]
    path = tmp_path / "catalog.jsonl"
    path.write_text("\n".join(lines) + "\n")
    said: list[str] = []
    totals = await load(
        path, origin_url="http://origin", token=TOKEN, batch=2, say=said.append, client=client
    )
    assert totals.counts == {
        "inserted": 3,
        "updated": 0,
        "unchanged": 0,
        "skipped": 0,
        "rejected": 3,
    }
    assert any(s.startswith("line 3: not JSON") for s in said)
    assert any(s.startswith("rejected: line 5, image: has 3 numbers") for s in said)
    assert said[-1].startswith("6/6 items")
    index = origin_of(application).index
    assert {"f-1", "f-2", "f-5"} <= set(index.row_of)
    assert "f-4" not in index.row_of  # it was in the refused batch
    again = await load(
        path, origin_url="http://origin", token=TOKEN, batch=2, say=said.append, client=client
    )
    assert again.counts["unchanged"] == 3


async def test_the_cli_loader_stops_on_a_wrong_token(
    app: tuple[FastAPI, httpx.AsyncClient], tmp_path: Path
) -> None:
    _, client = app
    path = tmp_path / "catalog.jsonl"
    path.write_text(json.dumps(new_item("f-1")) + "\n")
    with pytest.raises(LoadError, match="refused the admin token"):
        await load(path, origin_url="http://origin", token="nope", say=print, client=client)


async def test_items_out_of_stock_or_repriced_are_purged_at_every_edge(
    app: tuple[FastAPI, httpx.AsyncClient], redis: Redis, admin_settings: Settings
) -> None:
    _, client = app
    await post(client, [new_item("sku-a"), new_item("sku-b"), new_item("sku-c")])
    changed = [
        new_item("sku-a", 2, availability="out_of_stock"),
        new_item("sku-b", 2, price=99.0),
        new_item("sku-c", 2, title="Only the title changed"),
        new_item("sku-new"),
    ]
    assert (await post(client, changed)).status_code == 200
    for region in admin_settings.regions:
        entries = await redis.xrange(keys.edge_sync_stream(region))
        messages = [decode_entry(fields)[0].message for _, fields in entries]
        purges = [m for m in messages if not isinstance(m, ItemsChanged)]
        assert purges == [PurgeTag("sku-a", soft=False), PurgeTag("sku-b", soft=False)]
        # and every change, for the edges' item vectors
        changes = [m for m in messages if isinstance(m, ItemsChanged)]
        assert changes[-1].item_ids == ("sku-a", "sku-b", "sku-c", "sku-new")
        assert changes[-1].version > changes[-2].version
