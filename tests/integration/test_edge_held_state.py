"""``GET /v1/internal/users/{user_id}/held`` on an edge: what it holds of a user (the model's
version, whether it knows their preferences), behind the service token. The real origin
and edge apps in process, the suite's Redis between them, ranking at the edge on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import numpy as np
import pytest
from pydantic import SecretStr
from redis.asyncio import Redis

from config.settings import Settings
from edge.app import create_app as create_edge
from relevance.user_model import UserModel, model_bytes
from sync.messages import UserUpdate
from sync.publisher import SyncPublisher
from tests.apps import serving
from tests.credentials import bearer, user_token
from tests.integration.test_edge_api import applied
from tests.integration.test_edge_ranking import Stack, running

SERVICE_TOKEN = "service-token-0123456789abcdef"
SERVICE = bearer(SERVICE_TOKEN)


def held_path(user_id: str) -> str:
    return f"/v1/internal/users/{user_id}/held"


@pytest.fixture
async def settings(origin_settings: Settings) -> Settings:
    return origin_settings.model_copy(
        update={"edge_ranking": True, "origin_token": SecretStr(SERVICE_TOKEN)}
    )


@pytest.fixture
async def stack(settings: Settings) -> AsyncIterator[Stack]:
    async with running(settings) as stack:
        yield stack


async def held(stack: Stack, user_id: str) -> dict[str, Any]:
    response = await stack.client.get(held_path(user_id), headers=SERVICE)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def test_a_user_the_edge_knows_nothing_of(stack: Stack) -> None:
    assert await held(stack, "nobody") == {
        "user_id": "nobody",
        "region": "us-east",
        "model_version": None,
        "preferences_known": False,
        "edge_ranking": True,
        "serves": False,
        "seen_segment": "new",
    }


async def test_a_user_ranked_here_then_kept_fresh_by_the_sync_stream(
    stack: Stack, settings: Settings, redis: Redis
) -> None:
    await stack.ask("ann")  # the edge fetched ann's state: no model written yet, version 0
    state = await held(stack, "ann")
    assert (state["model_version"], state["preferences_known"], state["serves"]) == (0, True, True)
    dim = settings.embedding_dim
    model = UserModel(np.full(dim, 0.1, np.float32), np.full(dim, 1e-3, np.float32))
    publisher = SyncPublisher(redis, settings.regions, stack.clock)
    await publisher.publish([UserUpdate("ann", 7, model=model_bytes(model))])
    await applied(stack.app, 1)
    assert (await held(stack, "ann"))["model_version"] == 7
    # a model of a user this edge does not serve is not held
    await publisher.publish([UserUpdate("zed", 3, model=model_bytes(model))])
    await applied(stack.app, 2)
    assert (await held(stack, "zed"))["model_version"] is None


async def test_feedback_through_the_edge_makes_it_serve_the_user(stack: Stack) -> None:
    items = [{"item_id": f"it-{n:06d}", "action": "click"} for n in range(3)]
    response = await stack.client.post(
        "/v1/feedback",
        json={"user_id": "cid", "feedback": items},
        headers=bearer(user_token("cid", now_s=stack.clock())),
    )
    assert response.status_code == 200, response.text
    state = await held(stack, "cid")
    assert (state["serves"], state["seen_segment"], state["model_version"]) == (
        True,
        "active",
        None,
    )


async def test_looking_does_not_keep_a_user_held(stack: Stack) -> None:
    await stack.ask("ann")
    await stack.ask("bob")
    table = stack.node.user_models
    assert table is not None
    await held(stack, "ann")
    assert list(table._held) == ["ann", "bob"]  # ann is still the first to go


@pytest.mark.parametrize(
    "headers",
    [
        {},
        bearer("not-the-service-token"),
        bearer(user_token("ann", now_s=0.0)),
        {"authorization": SERVICE_TOKEN},  # no scheme
    ],
    ids=["none", "wrong", "user-token", "no-scheme"],
)
async def test_without_the_service_token_it_is_a_401(stack: Stack, headers: dict[str, str]) -> None:
    response = await stack.client.get(held_path("ann"), headers=headers)
    assert response.status_code == 401
    assert response.json()["field"] == "authorization"
    # credentials first: an invalid id without them is a 401 too
    assert (await stack.client.get(held_path("bad id!"), headers=headers)).status_code == 401


@pytest.mark.parametrize("user_id", ["bad id!", "x" * 129, "ann%00"], ids=["space", "long", "nul"])
async def test_an_id_the_api_would_refuse_is_a_400(stack: Stack, user_id: str) -> None:
    response = await stack.client.get(held_path(user_id), headers=SERVICE)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == "user_id"


async def test_an_id_with_a_slash_is_no_such_route(stack: Stack) -> None:
    response = await stack.client.get(held_path("a%2Fb"), headers=SERVICE)
    assert response.status_code == 404


async def test_with_no_service_token_configured_internal_routes_are_closed(
    origin_settings: Settings,
) -> None:
    edge_app = create_edge(
        origin_settings,
        region="us-east",
        origin_transport=httpx.MockTransport(lambda _: httpx.Response(503)),
    )
    async with serving(edge_app, "http://edge") as client:
        for headers in ({}, SERVICE):
            response = await client.get(held_path("ann"), headers=headers)
            assert response.status_code == 401
            assert "PERSO_ORIGIN_TOKEN" in response.json()["reason"]


async def test_the_document_says_who_may_call_it(stack: Stack) -> None:
    spec = (await stack.client.get("/openapi.json")).json()
    operation = spec["paths"][held_path("{user_id}")]["get"]
    assert operation["security"] == [{"ServiceToken": []}]
    assert {"200", "400", "401"} <= set(operation["responses"])
    assert spec["paths"]["/metrics"]["get"]["security"] == []
