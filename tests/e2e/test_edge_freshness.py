"""A click at one edge reaches every edge of the user's region: real processes (embedded
Redis, the origin, a stream worker, two edges of one region with ranking at the edge), the
edges' ``GET /v1/internal/users/{user_id}/held`` as the observable, then a request at each
edge ranked there from the new model with no origin call (what ``benchmarks.freshness``
measures under load)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from redis.asyncio import Redis

from config.settings import Settings
from origin.learned.user_models import decode_record, observation_hash
from perso.stack import Stack
from perso.stack_endpoints import Endpoints
from protocol import keys
from protocol.segments import Segment
from tests.credentials import IDENTITY_KEY, bearer, user_token

pytestmark = pytest.mark.e2e

REGION = "us-east"


@pytest.fixture
async def two_edges(tmp_path: Path) -> AsyncIterator[tuple[Endpoints, Stack, list[str]]]:
    settings = Settings(
        data_dir=tmp_path,
        catalog_size=300,
        embedding_dim=32,
        event_partitions=4,
        text_encoder="hashing",
        regions=(REGION,),
        workers=1,
        edge_ranking=True,
        freshness_active_s=0.0,
        freshness_casual_s=0.0,
        identity_keys=SecretStr(IDENTITY_KEY),
        log_level="warning",
    )
    stack = Stack(settings, free_ports=True, redis_persistent=False, say=lambda _line: None)
    async with stack as endpoints:
        second = await stack.add_edge(REGION)
        yield endpoints, stack, [endpoints.edges[REGION], second]


async def personalize(client: httpx.AsyncClient, edge: str, user: str) -> httpx.Response:
    token = user_token(user, now_s=time.time(), segment=Segment.POWER)
    body = {"user_id": user, "context": {"page_type": "home", "device": "mobile"}}
    response = await client.post(f"{edge}/v1/personalize", json=body, headers=bearer(token))
    assert response.status_code == 200, response.text
    return response


async def held(client: httpx.AsyncClient, edge: str, user: str, token: str) -> dict[str, Any]:
    response = await client.get(f"{edge}/v1/internal/users/{user}/held", headers=bearer(token))
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def feedback(client: httpx.AsyncClient, edge: str, user: str, **body: Any) -> None:
    token = user_token(user, now_s=time.time(), segment=Segment.POWER)
    response = await client.post(
        f"{edge}/v1/feedback", json={"user_id": user, **body}, headers=bearer(token)
    )
    assert response.status_code == 200, response.text


async def version_with(redis: Redis, user: str, interaction_id: str) -> int:
    """The version of the user's record that first has ``interaction_id`` applied."""
    wanted = observation_hash(interaction_id)
    for _ in range(200):
        record = decode_record(await redis.get(keys.user_record(user)), 32)
        if record.applied(wanted):
            return record.version
        await asyncio.sleep(0.05)
    raise AssertionError(f"{interaction_id} never reached {user}'s model")


async def test_a_click_at_one_edge_is_held_by_every_edge_of_the_region(
    two_edges: tuple[Endpoints, Stack, list[str]],
) -> None:
    endpoints, stack, edges = two_edges
    assert len(stack.processes()) == 5  # redis, origin, worker, two edges
    service = endpoints.origin_token
    async with (
        Redis.from_url(endpoints.redis_url) as redis,
        httpx.AsyncClient(timeout=10.0) as client,
    ):
        # ann is a power user, and the first edge has seen it (11 interactions today)
        warm = [{"item_id": f"it-{n:06d}", "action": "click"} for n in range(11)]
        await feedback(client, edges[0], "ann", feedback=warm)
        shown = {}
        for edge in edges:  # each edge fetches ann's state and the segment's pool once
            response = await personalize(client, edge, "ann")
            assert response.json()["metadata"]["tier"] == "edge"
            shown[edge] = response.json()
            assert (await held(client, edge, "ann", service))["preferences_known"] is True
        first = shown[edges[0]]
        click = {
            "item_id": first["items"][0]["item_id"],
            "action": "click",
            "position": 1,
            "interaction_id": "the-click",
        }
        await feedback(client, edges[0], "ann", request_id=first["request_id"], feedback=[click])
        version = await version_with(redis, "ann", "the-click")
        for edge in edges:
            for _ in range(200):
                if ((await held(client, edge, "ann", service))["model_version"] or 0) >= version:
                    break
                await asyncio.sleep(0.05)
            else:
                pytest.fail(f"{edge} never held version {version} of ann's model")
            again = await personalize(client, edge, "ann")
            assert again.json()["metadata"]["tier"] == "edge"
            assert again.headers["x-cache"] == "HIT"  # the pool at hand, no fill
        for edge in edges:  # one state fetch and one pool fill each, at the first request
            metrics = (await client.get(f"{edge}/metrics")).text
            assert 'perso_edge_user_fetches_total{region="us-east"} 1.0' in metrics
            assert 'perso_edge_pool_fills_total{region="us-east"} 1.0' in metrics
