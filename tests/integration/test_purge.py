"""``POST /v1/admin/purge`` and the feedback path publish to every region's sync stream."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import SecretStr
from redis.asyncio import Redis

from config.settings import Settings
from origin.app import create_app
from protocol import keys
from sync.codec import decode_entry
from sync.messages import (
    InvalidateKey,
    InvalidateSegment,
    InvalidateUser,
    ItemsChanged,
    Message,
    ModelEpoch,
    PurgeTag,
)
from tests.apps import serving

ADMIN = "purge-admin-token-0123456789"
REGIONS = ("us-east", "eu-west", "ap-south")


@pytest.fixture
async def admin_origin(origin_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    settings = origin_settings.model_copy(
        update={"admin_token": SecretStr(ADMIN), "regions": REGIONS}
    )
    async with serving(create_app(settings), "http://origin") as client:
        client.headers["authorization"] = f"Bearer {ADMIN}"
        yield client


async def messages_in(redis: Redis, region: str) -> list[Message]:
    """The region's sync messages but the catalog changes announced for the edges' item
    vectors (``ItemsChanged``: at every catalog write and origin start; tested in
    ``test_admin_catalog`` and ``test_edge_own_candidates``)."""
    entries = await redis.xrange(keys.edge_sync_stream(region))
    messages = [decode_entry(fields)[0].message for _, fields in entries]
    return [m for m in messages if not isinstance(m, ItemsChanged)]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"tag": "it-000042"}, PurgeTag("it-000042", soft=False)),
        ({"tag": "it-000042", "soft": True}, PurgeTag("it-000042", soft=True)),
        ({"user_id": "u-42"}, InvalidateUser("u-42", reason="admin")),
        ({"segment": "casual"}, InvalidateSegment("casual")),
        ({"key": "a" * 64}, InvalidateKey("a" * 64)),
    ],
)
async def test_a_purge_reaches_every_region(
    admin_origin: httpx.AsyncClient, redis: Redis, body: dict[str, object], message: Message
) -> None:
    response = await admin_origin.post("/v1/admin/purge", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["regions"] == list(REGIONS)
    for region in REGIONS:
        assert (await messages_in(redis, region))[-1] == message


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "body"),
        ({"tag": "a", "user_id": "b"}, "body"),
        ({"user_id": "u", "soft": True}, "body"),
        ({"segment": "gold"}, "segment"),
        ({"key": "not-a-key"}, "key"),
        ({"tag": "bad tag!"}, "tag"),
    ],
)
async def test_bad_purges_are_400s(
    admin_origin: httpx.AsyncClient, body: dict[str, object], field: str
) -> None:
    response = await admin_origin.post("/v1/admin/purge", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field


async def test_purges_need_the_admin_token(admin_origin: httpx.AsyncClient) -> None:
    response = await admin_origin.post(
        "/v1/admin/purge", json={"tag": "x"}, headers={"authorization": "Bearer wrong"}
    )
    assert response.status_code == 401


async def test_a_purchase_invalidates_the_buyer_everywhere(
    admin_origin: httpx.AsyncClient, redis: Redis
) -> None:
    feedback = {
        "user_id": "buyer",
        "feedback": [
            {"item_id": "it-000001", "action": "purchase"},
            {"item_id": "it-000002", "action": "purchase"},
            {"item_id": "it-000003", "action": "click"},
        ],
    }
    assert (await admin_origin.post("/v1/feedback", json=feedback)).status_code == 200
    for region in REGIONS:
        # one message for the user, however many items were bought
        assert await messages_in(redis, region) == [InvalidateUser("buyer", reason="purchase")]


async def test_a_model_epoch_is_the_next_one_at_every_edge(
    admin_origin: httpx.AsyncClient, redis: Redis
) -> None:
    first = await admin_origin.post("/v1/admin/model-epoch", json={"model_version": "nn-2"})
    second = await admin_origin.post("/v1/admin/model-epoch", json={"model_version": "nn-3"})
    assert (first.json()["epoch"], second.json()["epoch"]) == (1, 2)
    for region in REGIONS:
        assert (await messages_in(redis, region))[-2:] == [
            ModelEpoch(1, "nn-2"),
            ModelEpoch(2, "nn-3"),
        ]
    bad = await admin_origin.post("/v1/admin/model-epoch", json={"model_version": ""})
    assert (bad.status_code, bad.json()["field"]) == (400, "model_version")
