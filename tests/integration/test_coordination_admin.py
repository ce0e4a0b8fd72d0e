"""Locks where the seeds use them, through the origin's admin API: model deployment under the
global lock with a fenced epoch, blue-green catalog rebuilds, lock status and force release,
lock metrics. Real Redis, Qdrant local mode, the origin app in-process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from config.settings import Settings
from coordination.fencing import FencedPointer
from coordination.redis_lock import RedisLock
from origin.app import Origin, create_app
from origin.catalog.deployment import DEPLOYMENT_RESOURCE, decode
from origin.catalog.ingest import ensure_sample_catalog
from origin.catalog.rebuild import CATALOG_RESOURCE
from protocol import keys
from sync.codec import decode_entry
from sync.messages import ModelEpoch
from tests.apps import serving

TOKEN = "coordination-admin-token"
ADMIN = {"authorization": f"Bearer {TOKEN}"}
ITEMS = 200  # a small catalog: each test ingests it


@pytest.fixture
async def settings(
    redis: Redis, redis_url: str, make_settings: Callable[..., Settings]
) -> Settings:
    settings = make_settings(
        redis_url=redis_url,
        event_partitions=2,
        admin_token=TOKEN,
        text_encoder="hashing",
        catalog_size=ITEMS,
    )
    await ensure_sample_catalog(settings, redis)
    return settings


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    application = create_app(settings)
    async with serving(application, "http://origin") as client:
        client.headers.update(ADMIN)
        yield application, client


def origin_of(app: FastAPI) -> Origin:
    origin: Origin = app.state.origin
    return origin


async def deploy(client: httpx.AsyncClient, version: str) -> httpx.Response:
    return await client.post("/v1/admin/model-epoch", json={"model_version": version})


# --- model deployment ------------------------------------------------------------------


async def test_concurrent_deployments_take_turns_and_each_gets_its_own_epoch(
    app: tuple[FastAPI, httpx.AsyncClient], redis: Redis
) -> None:
    _, client = app
    answers = await asyncio.gather(*(deploy(client, f"nn-{i}") for i in range(5)))
    assert [a.status_code for a in answers] == [200] * 5
    epochs = sorted(a.json()["epoch"] for a in answers)
    assert epochs == [1, 2, 3, 4, 5]
    stored = decode(await FencedPointer(redis, keys.MODEL_DEPLOYMENT).read())
    assert stored is not None
    assert stored.epoch == 5
    # The regions heard the epochs in the order they were written.
    entries = await redis.xrange(keys.edge_sync_stream("us-east"))
    sent = (decode_entry(f)[0].message for _, f in entries)
    heard = [m.epoch for m in sent if isinstance(m, ModelEpoch)]
    assert heard == [1, 2, 3, 4, 5]
    assert not await redis.exists(keys.lock(DEPLOYMENT_RESOURCE))


async def test_a_deployment_meeting_a_held_lock_is_a_409_and_writes_nothing(
    app: tuple[FastAPI, httpx.AsyncClient], redis: Redis
) -> None:
    _, client = app
    other = RedisLock(redis, lambda: 0.0)
    held = await other.acquire(DEPLOYMENT_RESOURCE, 60_000)
    answer = await deploy(client, "nn-9")
    assert answer.status_code == 409
    assert "in progress" in answer.json()["reason"]
    assert await FencedPointer(redis, keys.MODEL_DEPLOYMENT).read() is None
    assert await other.release(held)
    assert (await deploy(client, "nn-9")).json()["epoch"] == 1


async def test_a_deployer_paused_past_its_lease_cannot_overwrite_a_newer_epoch(
    app: tuple[FastAPI, httpx.AsyncClient], redis: Redis
) -> None:
    _, client = app
    pointer = FencedPointer(redis, keys.MODEL_DEPLOYMENT)
    lock = RedisLock(redis, lambda: 0.0)
    paused = await lock.acquire(DEPLOYMENT_RESOURCE, 30)
    await asyncio.sleep(0.06)  # its lease lapses while it is paused
    assert (await deploy(client, "nn-new")).json()["epoch"] == 1
    # It wakes and writes what it had computed: refused.
    assert not await pointer.write(b'{"epoch": 1, "model_version": "nn-old"}', paused.fencing)
    stored = decode(await pointer.read())
    assert stored is not None
    assert stored.model_version == "nn-new"


# --- catalog rebuild -------------------------------------------------------------------


async def rebuild(client: httpx.AsyncClient, key: str, **params: Any) -> httpx.Response:
    return await client.post(
        "/v1/admin/catalog/rebuild", headers={"idempotency-key": key}, params=params
    )


async def test_a_rebuild_builds_a_slot_promotes_it_and_drops_the_old_one(
    app: tuple[FastAPI, httpx.AsyncClient], redis: Redis
) -> None:
    application, client = app
    origin = origin_of(application)
    before = (await client.get("/v1/admin/catalog/index")).json()
    assert before["slot"] == "items"  # the plain collection an ingest creates

    first = await rebuild(client, "r-1", wait="true")
    assert first.status_code == 200, first.text
    result = first.json()["result"]
    assert first.json()["status"] == "done"
    assert (result["slot"], result["previous"], result["items"]) == ("items__r1", "items", ITEMS)
    assert result["promote_ms"] < result["build_ms"]
    live = (await client.get("/v1/admin/catalog/index")).json()
    assert (live["slot"], live["recorded_slot"], live["slots"]) == ("items__r1",) * 2 + (
        ["items__r1"],
    )
    assert len(origin.index) == ITEMS
    # Personalize still answers from the new slot.
    assert await origin.store.count_items() == ITEMS

    second = (await rebuild(client, "r-2", wait="true")).json()["result"]
    assert (second["slot"], second["previous"], second["dropped"]) == (
        "items__r2",
        "items__r1",
        ["items__r1"],
    )
    assert second["fencing"] > result["fencing"]
    assert (await client.get("/v1/admin/catalog/index")).json()["slots"] == ["items__r2"]
    assert not await redis.exists(keys.lock(CATALOG_RESOURCE))


async def test_a_rebuild_is_idempotent_by_key_and_concurrent_requests_share_one_run(
    app: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = app
    answers = await asyncio.gather(*(rebuild(client, "same", wait="true") for _ in range(4)))
    assert {a.status_code for a in answers} == {200}
    assert {a.json()["result"]["slot"] for a in answers} == {"items__r1"}
    # Asked again later: the first run's result, no new build.
    again = await rebuild(client, "same")
    assert (again.status_code, again.json()["result"]["slot"]) == (200, "items__r1")
    assert (await client.get("/v1/admin/catalog/index")).json()["slots"] == ["items__r1"]


async def test_a_background_rebuild_reports_its_status(
    app: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = app
    started = await rebuild(client, "bg")
    assert started.status_code == 202
    url = started.json()["status_url"]
    for _ in range(200):
        status = (await client.get(url)).json()
        if status["status"] == "done":
            break
        assert status["status"] == "in_progress"
        await asyncio.sleep(0.05)
    assert status["result"]["slot"] == "items__r1"
    missing = await client.get("/v1/admin/catalog/rebuild/never-ran")
    assert (missing.status_code, missing.json()["field"]) == (404, "rebuild_id")
    bad = await client.post("/v1/admin/catalog/rebuild", headers={"idempotency-key": "a b"})
    assert (bad.status_code, bad.json()["field"]) == (400, "idempotency-key")


async def test_an_ingest_during_the_build_makes_it_build_again(
    app: tuple[FastAPI, httpx.AsyncClient], redis: Redis
) -> None:
    application, client = app
    origin = origin_of(application)
    store = origin.store
    real_build = store.upsert_items
    bumped = False

    async def upsert_then_ingest(*args: Any, **kwargs: Any) -> None:
        # The first build's copy is interrupted by a catalog write (another origin's ingest).
        nonlocal bumped
        await real_build(*args, **kwargs)
        if not bumped and kwargs.get("collection", "").startswith("items__"):
            bumped = True
            await redis.incr(keys.CATALOG_VERSION)

    store.upsert_items = upsert_then_ingest  # type: ignore[method-assign]
    result = (await rebuild(client, "drift", wait="true")).json()["result"]
    assert result["builds"] == 2
    assert result["slot"] == "items__r2"
    assert (await client.get("/v1/admin/catalog/index")).json()["slots"] == ["items__r2"]


async def test_an_ingest_waits_for_a_promotion_in_progress(
    app: tuple[FastAPI, httpx.AsyncClient], redis: Redis
) -> None:
    _, client = app
    lock = RedisLock(redis, lambda: 0.0)
    held = await lock.acquire(CATALOG_RESOURCE, 60_000)
    item = {
        "item_id": "sku-1",
        "version": 1,
        "title": "Aurora Headphones",
        "category": "electronics",
        "category_name": "Electronics",
        "brand": "Aurora",
        "price": 129.99,
    }
    pending = asyncio.ensure_future(client.post("/v1/admin/catalog/items", json=[item]))
    await asyncio.sleep(0.3)
    assert not pending.done()  # the write waits for the lock
    version = int(await redis.get(keys.CATALOG_VERSION) or 0)
    assert await lock.release(held)
    answer = await pending
    assert answer.status_code == 200, answer.text
    assert int(await redis.get(keys.CATALOG_VERSION) or 0) == version + 1


# --- lock admin and metrics ------------------------------------------------------------


async def test_lock_status_and_force_release(
    app: tuple[FastAPI, httpx.AsyncClient], redis: Redis
) -> None:
    _, client = app
    lock = RedisLock(redis, lambda: 0.0)
    held = await lock.acquire("preferences:u-1", 60_000)
    status = (await client.get("/v1/admin/locks/preferences:u-1")).json()
    assert status["held"] is True
    assert status["holder"] == held.token[:8]
    assert status["fencing"] == held.fencing
    assert 50_000 < status["remaining_ms"] <= 60_000
    assert status["held_here"] is False

    listing = (await client.get("/v1/admin/locks")).json()
    assert [entry["resource"] for entry in listing["locks"]] == [
        DEPLOYMENT_RESOURCE,
        CATALOG_RESOURCE,
        keys.STREAM_TRIMMER,
    ]

    released = await client.delete("/v1/admin/locks/preferences:u-1")
    assert released.status_code == 200
    assert released.json()["fencing"] == held.fencing
    assert (await client.get("/v1/admin/locks/preferences:u-1")).json() == {
        "resource": "preferences:u-1",
        "held": False,
    }
    # The evicted holder finds its lease gone.
    assert not await lock.release(held)
    again = await client.delete("/v1/admin/locks/preferences:u-1")
    assert again.status_code == 404
    bad = await client.get("/v1/admin/locks/%20x")
    assert (bad.status_code, bad.json()["field"]) == (400, "resource")


async def test_lock_admin_needs_the_admin_token(app: tuple[FastAPI, httpx.AsyncClient]) -> None:
    _, client = app
    for method, url in (
        ("GET", "/v1/admin/locks"),
        ("DELETE", "/v1/admin/locks/x"),
        ("POST", "/v1/admin/catalog/rebuild"),
        ("GET", "/v1/admin/catalog/index"),
    ):
        answer = await client.request(method, url, headers={"authorization": "Bearer wrong"})
        assert answer.status_code == 401, url


async def test_metrics_count_grants_contention_and_latency(
    app: tuple[FastAPI, httpx.AsyncClient], redis: Redis
) -> None:
    _, client = app
    await deploy(client, "nn-1")
    held = await RedisLock(redis, lambda: 0.0).acquire(DEPLOYMENT_RESOURCE, 60_000)
    assert (await deploy(client, "nn-2")).status_code == 409
    text = (await client.get("/metrics")).text
    assert "perso_origin_lock_grants_total 1.0" in text
    assert "perso_origin_lock_contended_total 5.0" in text  # every attempt of the 409
    assert "perso_origin_lock_gave_up_total 1.0" in text
    assert 'perso_origin_lock_acquire_seconds_bucket{le="+Inf"} 1.0' in text
    assert "perso_origin_locks_held 0.0" in text
    assert f"perso_origin_catalog_items {ITEMS}.0" in text
    del held
