"""An edge in front of a catalog that changes: a delete through the origin's admin API
reaches it through the sync stream, and a shop that starts empty sees its first items within
seconds. The real origin and edge apps in-process, the suite's Redis between them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import numpy as np
import pytest
from pydantic import SecretStr
from redis.asyncio import Redis

from config.settings import Settings
from edge.app import create_app as create_edge
from edge.http.asgi import EdgeFront
from edge.node import Edge
from origin.app import create_app as create_origin
from origin.catalog.own_catalog import start_own_catalog
from tests.apps import serving
from tests.fakes import FakeClock
from tests.integration.test_edge_api import EdgeUnderTest, Switchable, applied, subscribed
from tests.integration.test_own_catalog import own_item

ADMIN = {"authorization": "Bearer removal-admin-token"}


@pytest.fixture
async def synced(
    origin_settings: Settings,
) -> AsyncIterator[tuple[EdgeUnderTest, EdgeFront, httpx.AsyncClient]]:
    settings = origin_settings.model_copy(
        update={"admin_token": SecretStr(ADMIN["authorization"].removeprefix("Bearer "))}
    )
    clock = FakeClock()
    origin_app = create_origin(settings, rng=np.random.default_rng(7))
    network = Switchable(origin_app)
    edge_app = create_edge(settings, region="us-east", clock=clock, origin_transport=network)
    async with (
        serving(origin_app, "http://origin") as origin,
        serving(edge_app, "http://edge") as client,
    ):
        await subscribed(edge_app)
        origin.headers.update(ADMIN)
        yield EdgeUnderTest(client, network, clock), edge_app, origin


def edge_of(edge_app: EdgeFront) -> Edge:
    node: Edge = edge_app.fastapi.state.edge
    return node


async def test_a_deleted_item_leaves_the_edge_entries_and_popular_list_showing_it(
    synced: tuple[EdgeUnderTest, EdgeFront, httpx.AsyncClient],
) -> None:
    edge, edge_app, origin = synced
    node = edge_of(edge_app)
    shown = await edge.personalize()
    assert (await edge.personalize()).metadata.cache_hit
    assert node.popular.entry is not None
    gone = shown.items[0].item_id
    popular_gone = node.popular.entry.items[0].item_id
    response = await origin.post(
        "/v1/admin/catalog/items:delete", json={"item_ids": [gone, popular_gone]}
    )
    assert response.status_code == 200, response.text
    assert set(response.json()["deleted"]) == {gone, popular_gone}
    await applied(edge_app, 2)
    refilled = await edge.personalize()
    assert not refilled.metadata.cache_hit  # the entry that showed it is gone
    assert gone not in {i.item_id for i in refilled.items}
    assert popular_gone not in {i.item_id for i in node.popular.entry.items}
    assert gone in node.removed


async def test_a_fill_in_flight_during_a_removal_is_stored_without_the_item(
    synced: tuple[EdgeUnderTest, EdgeFront, httpx.AsyncClient],
) -> None:
    edge, edge_app, _ = synced
    node = edge_of(edge_app)
    shown = await edge.personalize("u-2")
    # As if the removal had arrived while the next fill was on its way: the origin still
    # ranks the item, the edge must not keep it.
    node.forget_item(shown.items[0].item_id)
    edge.clock.tick(250)  # the pool expired (a minute), the removal still remembered (five)
    refilled = await edge.personalize("u-2")
    assert not refilled.metadata.cache_hit
    assert shown.items[0].item_id not in {i.item_id for i in refilled.items}
    again = await edge.personalize("u-2")
    assert again.metadata.cache_hit
    assert shown.items[0].item_id not in {i.item_id for i in again.items}
    edge.clock.tick(301)  # forgotten after five minutes
    assert shown.items[0].item_id not in node.removed


async def test_an_empty_answer_is_kept_ten_seconds_so_the_first_items_show_soon(
    make_settings: Callable[..., Settings], redis_url: str, redis: Redis
) -> None:
    settings = make_settings(
        redis_url=redis_url,
        event_partitions=4,
        admin_token=ADMIN["authorization"].removeprefix("Bearer "),
        catalog="empty",
        text_encoder="hashing",
    )
    started = await start_own_catalog(settings, redis)
    assert started.items == 0
    clock = FakeClock()
    origin_app = create_origin(settings)
    network = Switchable(origin_app)
    edge_app = create_edge(settings, region="us-east", clock=clock, origin_transport=network)
    async with (
        serving(origin_app, "http://origin") as origin,
        serving(edge_app, "http://edge") as client,
    ):
        edge = EdgeUnderTest(client, network, clock)
        assert (await client.get("/readyz")).status_code == 200
        assert (await edge.personalize()).items == []
        assert (await edge.personalize()).metadata.cache_hit  # kept, briefly
        added = await origin.post(
            "/v1/admin/catalog/items", json=[own_item("sku-1")], headers=ADMIN
        )
        assert added.status_code == 200, added.text
        clock.tick(10)
        answer = await edge.personalize()
        assert not answer.metadata.cache_hit
        assert [i.item_id for i in answer.items] == ["sku-1"]
