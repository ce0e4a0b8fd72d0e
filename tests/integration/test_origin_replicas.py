"""Several origins in step (issue 20, part 3): a catalog origin that owns Qdrant local mode
and a catalog replica that loads its index from it over the internal routes, both real
origin apps in process over the suite's Redis; the replica's network to the catalog
origin is an ASGI transport to the catalog origin's app (or nothing: the catalog origin
down). What one writes reaches the other through the origins' stream, with no restart."""

from __future__ import annotations

import asyncio
import functools
import statistics
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from config.settings import Settings
from origin.app import create_app
from origin.catalog.ingest import CatalogItemIn, ensure_sample_catalog, ingest_items
from origin.catalog.item_vectors import ItemVectors
from origin.catalog.replication import CatalogMark
from origin.catalog.vector_store import VectorStore
from origin.control import OriginControl
from origin.exceptions import CatalogOriginError
from origin.runtime import Origin
from protocol import keys
from sync.messages import CatalogChange
from sync.publisher import PUBLISH
from tests.apps import serving

ADMIN_TOKEN = "replicas-admin-token"
SERVICE_TOKEN = "replicas-service-token"
ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}
SERVICE = {"authorization": f"Bearer {SERVICE_TOKEN}"}
CATALOG_ORIGIN = "http://catalog-origin"
CANDIDATE = {"exploration_weight": 0.0, "diversity_weight": 0.3, "user_prior_scale": 8}


class Network(httpx.AsyncBaseTransport):
    """The replica's way to the catalog origin: its app in process while it is up; a
    refused connection while it is not (``app`` None)."""

    def __init__(self) -> None:
        self.app: FastAPI | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.app is None:
            raise httpx.ConnectError(
                "connection refused: the catalog origin is down", request=request
            )
        transport = httpx.ASGITransport(app=self.app)
        return await transport.handle_async_request(request)


@dataclass
class Running:
    app: FastAPI
    client: httpx.AsyncClient

    @property
    def origin(self) -> Origin:
        origin: Origin = self.app.state.origin
        return origin

    @property
    def control(self) -> OriginControl:
        control: OriginControl = self.app.state.control
        return control


@pytest.fixture
async def catalog_settings(
    redis: Redis, redis_url: str, make_settings: Callable[..., Settings]
) -> Settings:
    """The catalog origin: local mode under the test's data dir, 500 sample items; the
    deployment pointer's poll as good as off, so that only the stream can switch a policy."""
    settings = make_settings(
        redis_url=redis_url,
        event_partitions=4,
        admin_token=ADMIN_TOKEN,
        origin_token=SERVICE_TOKEN,
        text_encoder="hashing",
        policy_poll_s=3600,
    )
    await ensure_sample_catalog(settings, redis)
    return settings


@pytest.fixture
def replica_settings(catalog_settings: Settings, tmp_path: Path) -> Settings:
    return catalog_settings.model_copy(
        update={
            "catalog_origin_url": CATALOG_ORIGIN,
            "catalog_origin_wait_s": 10.0,
            "data_dir": tmp_path / "replica",
        }
    )


@asynccontextmanager
async def running(app: FastAPI, headers: dict[str, str]) -> AsyncIterator[Running]:
    async with serving(app, "http://origin") as client:
        client.headers.update(headers)
        yield Running(app, client)


@asynccontextmanager
async def catalog_origin(settings: Settings, network: Network) -> AsyncIterator[Running]:
    app = create_app(settings)
    async with running(app, ADMIN) as served:
        network.app = app
        try:
            yield served
        finally:
            network.app = None


@pytest.fixture
async def pair(
    catalog_settings: Settings, replica_settings: Settings
) -> AsyncIterator[tuple[Running, Running]]:
    network = Network()
    async with catalog_origin(catalog_settings, network) as owner:
        replica_app = create_app(replica_settings, catalog_transport=network)
        async with running(replica_app, ADMIN) as replica:
            yield owner, replica


async def until(check: Callable[[], bool], timeout_s: float = 5.0) -> float:
    """Seconds until ``check()`` holds (polled every millisecond); fails past the timeout."""
    started = time.perf_counter()
    while not check():
        if time.perf_counter() - started > timeout_s:
            pytest.fail(f"not within {timeout_s}s")
        await asyncio.sleep(0.001)
    return time.perf_counter() - started


def item(item_id: str, version: int = 1, **fields: Any) -> dict[str, Any]:
    return {
        "item_id": item_id,
        "version": version,
        "title": "Aurora Noise Cancelling Headphones",
        "category": "replicated",
        "category_name": "Replicated",
        "brand": "Aurora",
        "price": 129.99,
        "popularity": 0.4,
        **fields,
    }


def served(origin: Origin) -> dict[str, tuple[int, float]]:
    """Every item an origin serves: its version and price."""
    return {i.item_id: (i.version, i.price) for i in origin.index.items}


async def personalize(client: httpx.AsyncClient, **constraints: Any) -> list[str]:
    body = {
        "user_id": "u-1",
        "context": {"page_type": "home", "device": "mobile"},
        "constraints": {"count": 5, **constraints},
    }
    answer = await client.post("/v1/personalize", json=body, headers=SERVICE)
    assert answer.status_code == 200, answer.text
    return [i["item_id"] for i in answer.json()["items"]]


# --- loading ----------------------------------------------------------------------------------


async def test_a_replica_serves_the_catalog_origins_items(pair: tuple[Running, Running]) -> None:
    owner, replica = pair
    assert replica.origin.store is None
    assert (owner.origin.role, replica.origin.role) == ("owner", "replica")
    assert len(replica.origin.index) == len(owner.origin.index) == 500
    assert [i.item_id for i in replica.origin.index.items] == [
        i.item_id for i in owner.origin.index.items
    ]
    assert replica.origin.index.items == owner.origin.index.items
    np.testing.assert_allclose(replica.origin.index.vectors, owner.origin.index.vectors, atol=1e-6)
    assert replica.origin.catalog_mark == owner.origin.catalog_mark
    assert await personalize(replica.client)
    found = (await replica.client.get("/dependencies")).json()["dependencies"]
    assert found["catalog_origin"] == {
        "up": True,
        "url": CATALOG_ORIGIN,
        "version": owner.origin.catalog_mark.version,
        "slot": owner.origin.catalog_mark.slot,
        "items": 500,
    }
    assert "vector_store" not in found
    owner_found = (await owner.client.get("/dependencies")).json()["dependencies"]
    assert owner_found["vector_store"]["up"] is True


async def test_a_replica_started_before_the_catalog_origin_waits_for_it(
    catalog_settings: Settings, replica_settings: Settings
) -> None:
    network = Network()  # nothing answers yet
    async with AsyncExitStack() as stack:
        replica_app = create_app(replica_settings, catalog_transport=network)
        starting = asyncio.ensure_future(stack.enter_async_context(running(replica_app, ADMIN)))
        await asyncio.sleep(0.5)
        assert not starting.done()  # still asking
        await stack.enter_async_context(catalog_origin(catalog_settings, network))
        replica = await asyncio.wait_for(starting, 10)
        assert len(replica.origin.index) == 500


async def test_a_replica_gives_up_when_no_catalog_origin_answers_in_time(
    replica_settings: Settings,
) -> None:
    # A real connection to a port nobody listens on.
    nowhere = replica_settings.model_copy(
        update={"catalog_origin_url": "http://127.0.0.1:9", "catalog_origin_wait_s": 0.5}
    )
    app = create_app(nowhere)
    started = time.perf_counter()
    with pytest.raises(CatalogOriginError, match="PERSO_CATALOG_ORIGIN_WAIT_S"):
        async with serving(app, "http://origin"):
            pass
    assert 0.5 <= time.perf_counter() - started < 5


# --- following the catalog origin's writes ----------------------------------------------------


async def test_ingests_updates_and_deletes_reach_the_replica_without_a_restart(
    pair: tuple[Running, Running],
) -> None:
    owner, replica = pair
    written = await owner.client.post("/v1/admin/catalog/items", json=[item("sku-1")])
    assert written.json()["inserted"] == 1, written.text
    took = await until(lambda: "sku-1" in served(replica.origin))
    assert served(replica.origin)["sku-1"] == (1, 129.99)
    assert await personalize(replica.client, categories=["replicated"]) == ["sku-1"]
    row = replica.origin.index.row_of["sku-1"]
    np.testing.assert_allclose(
        replica.origin.index.vectors[row],
        owner.origin.index.vectors[owner.origin.index.row_of["sku-1"]],
        atol=1e-6,
    )
    assert replica.origin.catalog_mark == owner.origin.catalog_mark
    # a newer version replaces it
    await owner.client.post("/v1/admin/catalog/items", json=[item("sku-1", 2, price=99.0)])
    await until(lambda: served(replica.origin).get("sku-1") == (2, 99.0))
    # deleted: gone from the replica too
    deleted = await owner.client.delete("/v1/admin/catalog/items/sku-1")
    assert deleted.json()["deleted"] == ["sku-1"], deleted.text
    await until(lambda: "sku-1" not in served(replica.origin))
    assert await personalize(replica.client, categories=["replicated"]) == []
    assert len(replica.origin.index) == len(owner.origin.index) == 500
    assert replica.control.follower.stats.everything == 0  # item by item, never the whole
    print(f"ingest answered -> served by the replica: {took * 1000:.1f} ms")


async def test_changes_the_replica_cannot_fetch_yet_are_fetched_together_later(
    catalog_settings: Settings, replica_settings: Settings
) -> None:
    network = Network()
    async with catalog_origin(catalog_settings, network) as owner:
        replica_app = create_app(replica_settings, catalog_transport=network)
        async with running(replica_app, ADMIN) as replica:
            network.app = None  # the replica cannot reach the catalog origin for a while
            for batch in range(3):
                items = [item(f"b{batch}-{n}", price=10.0 + n) for n in range(50)]
                answer = await owner.client.post("/v1/admin/catalog/items", json=items)
                assert answer.status_code == 200, answer.text
            stats = replica.control.follower.stats
            await until(lambda: stats.failures >= 1)
            assert len(replica.origin.index) == 500  # serving what it holds meanwhile
            assert await personalize(replica.client)
            network.app = owner.app
            await until(lambda: len(replica.origin.index) == 650, timeout_s=10)
            await replica.control.follower.settled()
            assert served(replica.origin) == served(owner.origin)
            assert (stats.reloads, stats.items, stats.everything) == (1, 150, 0)


async def test_a_rebuilds_promotion_reaches_the_replica(pair: tuple[Running, Running]) -> None:
    owner, replica = pair
    answer = await owner.client.post(
        "/v1/admin/catalog/rebuild", params={"wait": "true"}, headers={"idempotency-key": "r-1"}
    )
    assert answer.status_code == 200, answer.text
    slot = answer.json()["result"]["slot"]
    assert owner.origin.catalog_mark.slot == slot
    await until(lambda: replica.origin.catalog_mark.slot == slot)
    assert replica.control.follower.stats.everything == 1
    assert served(replica.origin) == served(owner.origin)


async def test_a_catalog_origin_restarted_after_an_unannounced_write_brings_replicas_up(
    catalog_settings: Settings, replica_settings: Settings, redis: Redis
) -> None:
    network = Network()
    async with AsyncExitStack() as stack:
        first_life = AsyncExitStack()
        await first_life.enter_async_context(catalog_origin(catalog_settings, network))
        replica_app = create_app(replica_settings, catalog_transport=network)
        replica = await stack.enter_async_context(running(replica_app, ADMIN))
        heard = replica.control.changes
        # The catalog origin wrote an item, then died before announcing it.
        await first_life.aclose()
        await write_unannounced(catalog_settings, redis, "sku-quiet")
        assert "sku-quiet" not in served(replica.origin)
        # Started again (its store closed first: local mode admits one process), it
        # announces the catalog it holds, which the replica does not.
        second_life = AsyncExitStack()
        owner = await second_life.enter_async_context(catalog_origin(catalog_settings, network))
        await until(lambda: "sku-quiet" in served(replica.origin))
        assert replica.control.follower.stats.everything == 1
        assert replica.origin.catalog_mark == owner.origin.catalog_mark
        assert served(replica.origin) == served(owner.origin)
        # Started once more with nothing new: heard, and nothing reloaded.
        await second_life.aclose()
        await stack.enter_async_context(catalog_origin(catalog_settings, network))
        await until(lambda: replica.control.changes == heard + 2)
        await replica.control.follower.settled()
        assert replica.control.follower.stats.everything == 1


async def write_unannounced(settings: Settings, redis: Redis, item_id: str) -> None:
    vectors = await asyncio.to_thread(ItemVectors.from_settings, settings)
    store = VectorStore.open(settings)
    try:
        batch = [CatalogItemIn.model_validate(item(item_id))]
        await ingest_items(batch, vectors=vectors, store=store, redis=redis)
        await redis.incr(keys.CATALOG_VERSION)
    finally:
        await store.close()


# --- writes on a replica ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/admin/catalog/items", [item("sku-2")]),
        ("POST", "/v1/admin/catalog/items", "{not json"),  # refused before its body is read
        ("DELETE", "/v1/admin/catalog/items/it-000001", None),
        ("POST", "/v1/admin/catalog/items:delete", {"item_ids": ["it-000001"]}),
        ("POST", "/v1/admin/catalog/rebuild", None),
        ("GET", "/v1/admin/catalog/index", None),
    ],
)
async def test_a_catalog_write_on_a_replica_is_a_409_naming_the_catalog_origin(
    pair: tuple[Running, Running], method: str, path: str, body: object
) -> None:
    owner, replica = pair
    content = body if isinstance(body, str) else None
    json_body = None if isinstance(body, str) else body
    answer = await replica.client.request(
        method, path, json=json_body, content=content, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 409, answer.text
    problem = answer.json()
    assert problem["error"] == "catalog_replica"
    assert CATALOG_ORIGIN in problem["reason"]
    assert len(replica.origin.index) == len(owner.origin.index) == 500


# --- policies ---------------------------------------------------------------------------------


async def promote(client: httpx.AsyncClient, name: str) -> None:
    assert (await client.post(f"/v1/admin/policies/{name}/promote")).status_code == 200


def at_epoch(running: Running, epoch: int) -> bool:
    return running.origin.live.epoch >= epoch


async def test_a_policy_promoted_on_one_origin_is_live_on_the_other_through_the_stream(
    pair: tuple[Running, Running],
) -> None:
    owner, replica = pair
    defined = await owner.client.put("/v1/admin/policies/ranker-b", json=CANDIDATE)
    assert defined.status_code == 201, defined.text
    waits: list[float] = []
    for round_ in range(10):
        # promoted on either origin, live on the other (the pointer's poll is an hour)
        here, there = (owner, replica) if round_ % 2 == 0 else (replica, owner)
        name = "ranker-b" if round_ % 4 < 2 else "configured"
        started = time.perf_counter()
        await promote(here.client, name)
        await until(functools.partial(at_epoch, there, round_ + 1))
        waits.append(time.perf_counter() - started)
        assert there.origin.live.epoch == here.origin.live.epoch == round_ + 1
        assert there.origin.live.label == here.origin.live.label == f"{name}/1"
    # each learned at least the other's five from the stream (its own, maybe too, when the
    # stream came before the promoting route switched)
    assert min(replica.control.epochs, owner.control.epochs) >= 5
    answer = await replica.client.post(
        "/v1/personalize",
        json={"user_id": "u-2", "context": {"page_type": "home", "device": "mobile"}},
        headers=SERVICE,
    )
    assert answer.json()["metadata"]["policy"] == owner.origin.live.label
    ms = sorted(w * 1000 for w in waits)
    print(
        f"promotion answered + live on the other origin: median {statistics.median(ms):.1f} ms, "
        f"max {ms[-1]:.1f} ms over {len(ms)}"
    )
    assert ms[-1] < 1000


# --- gaps ---------------------------------------------------------------------------------------


async def test_a_gap_in_the_origins_stream_reloads_the_replicas_catalog(
    pair: tuple[Running, Running], redis: Redis
) -> None:
    owner, replica = pair
    # A message the origins cannot read breaks the chain: the next entry reveals the gap.
    script = redis.register_script(PUBLISH)
    unreadable = b"\x82\xa1v\x01\xa4type\xa9new_thing"
    stream = [keys.EDGE_SYNC_SEQ, keys.ORIGINS_SYNC_STREAM, keys.ORIGINS_SYNC_LAST]
    await script(keys=stream, args=[1000, 1, unreadable])
    await owner.client.post("/v1/admin/catalog/items", json=[item("sku-3")])
    await until(lambda: replica.control.follower.stats.everything == 1)
    await replica.control.follower.settled()
    assert "sku-3" in served(replica.origin)
    # The owner reads the pointer again but keeps its catalog: it is its store's only writer.
    assert owner.control.follower.stats.everything == 0


# --- origins that open the store themselves ---------------------------------------------------


async def test_an_origin_with_a_store_reloads_what_another_origin_announced_from_it(
    pair: tuple[Running, Running], redis: Redis
) -> None:
    """As every origin does over a shared Qdrant server: another origin wrote to the store
    and announced it; this one fetches the items (or everything) from the store itself."""
    owner, _ = pair
    origin = owner.origin
    assert origin.store is not None
    vectors = owner.app.state.catalog_writer.vectors
    batch = [CatalogItemIn.model_validate(item(f"shared-{n}")) for n in range(3)]
    await ingest_items(batch, vectors=vectors, store=origin.store, redis=redis)
    version = int(await redis.incr(keys.CATALOG_VERSION))
    ids = tuple(i.item_id for i in batch)
    slot = origin.catalog_mark.slot
    publisher = origin.publisher
    await publisher.publish_to_origins([CatalogChange("elsewhere", version, slot, ids)])
    await until(lambda: all(i in served(origin) for i in ids))
    assert origin.catalog_mark == CatalogMark(version, slot)
    # another origin deleted one: gone here as well
    await origin.store.delete_items(["shared-0"])
    await publisher.publish_to_origins(
        [CatalogChange("elsewhere", version + 1, slot, ("shared-0",))]
    )
    await until(lambda: "shared-0" not in served(origin))
    # everything, at a catalog this origin does not hold: the whole store read again
    await publisher.publish_to_origins([CatalogChange("elsewhere", version + 2, slot)])
    await until(lambda: owner.control.follower.stats.everything == 1)
    await owner.control.follower.settled()
    assert origin.catalog_mark == CatalogMark(version, slot)  # as read from Redis and the store
    assert set(served(origin)) >= {"shared-1", "shared-2"}
