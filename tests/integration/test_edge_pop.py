"""Two edge apps of one PoP on one PoP store (``PERSO_EDGE_STORE=redis``), in front of the
real origin app: they share one user's rate limit, and one cold key asked of both at once
costs the origin one fill."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from config.settings import Settings
from edge.app import create_app as create_edge
from edge.node import Edge
from origin.app import create_app as create_origin
from tests.apps import serving
from tests.credentials import bearer, user_token

REGION = "pop-1"


class CountingNetwork(httpx.AsyncBaseTransport):
    """The network from the PoP's edges to the origin, counting personalize calls."""

    def __init__(self, app: FastAPI) -> None:
        self._inner = httpx.ASGITransport(app=app)
        self.personalize = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/personalize":
            self.personalize += 1
        return await self._inner.handle_async_request(request)


@dataclass
class Pop:
    clients: list[httpx.AsyncClient]
    edges: list[Edge]
    network: CountingNetwork


@pytest.fixture
async def pop(origin_settings: Settings, redis_url: str) -> AsyncIterator[Pop]:
    # The PoP's shared cache path: the origin ranks, the processes share what it ranked.
    settings = origin_settings.model_copy(
        update={"edge_store": "redis", "edge_store_url": redis_url, "edge_ranking": False}
    )
    origin_app = create_origin(settings)
    network = CountingNetwork(origin_app)
    # The real clock: the store's keys and limits live by Redis's clock.
    apps = [
        create_edge(
            settings.model_copy(update={"edge_name": f"edge-{n}"}),
            region=REGION,
            origin_transport=network,
        )
        for n in range(2)
    ]
    async with (
        serving(origin_app, "http://origin"),
        serving(apps[0], "http://edge-0") as first,
        serving(apps[1], "http://edge-1") as second,
    ):
        edges = [app.fastapi.state.edge for app in apps]
        yield Pop([first, second], edges, network)


def body(user_id: str, page: str = "home") -> dict[str, object]:
    context = {"page_type": page, "device": "mobile", "geo": {"country": "US", "region": "NY"}}
    return {"user_id": user_id, "context": context}


async def test_one_user_spread_over_the_pops_processes_gets_the_tiers_limit(pop: Pop) -> None:
    """Free tier: 10 personalize requests a second, 10 at once. Over two processes with
    their own buckets the user would get 20 at once; sharing them, 10."""
    headers = bearer(user_token("u-free", now_s=time.time(), tier="free"))
    await pop.clients[0].post("/v1/personalize", json=body("u-free"), headers=headers)
    started = time.perf_counter()

    async def ask(n: int) -> bool:
        client = pop.clients[n % 2]
        response = await client.post("/v1/personalize", json=body("u-free"), headers=headers)
        assert response.status_code == 200, response.text  # over the limit: the cached answer
        return bool(response.json()["metadata"].get("rate_limited", False))

    limited = await asyncio.gather(*(ask(n) for n in range(40)))
    took = time.perf_counter() - started
    allowed = 1 + limited.count(False)
    assert 10 <= allowed <= 10 + 10 * took + 1, (allowed, took)
    for edge in pop.edges:
        limiter = edge.pop_limiter
        assert limiter is not None
        assert limiter.counters.shared > 0
        assert limiter.counters.process == 0
        assert edge.limiter.users_tracked == 0  # the process's own buckets were not used
    text = (await pop.clients[1].get("/metrics")).text
    assert f'perso_edge_rate_limit_checks_total{{decided_by="pop",region="{REGION}"}}' in text


async def test_a_cold_key_asked_of_both_processes_at_once_is_filled_once(pop: Pop) -> None:
    before = pop.network.personalize
    headers = {f"new-{n}": bearer(user_token(f"new-{n}", now_s=time.time())) for n in range(20)}

    async def ask(n: int) -> dict[str, object]:
        user = f"new-{n}"
        response = await pop.clients[n % 2].post(
            "/v1/personalize", json=body(user, page="category"), headers=headers[user]
        )
        assert response.status_code == 200, response.text
        answer: dict[str, object] = response.json()
        return answer

    answers = await asyncio.gather(*(ask(n) for n in range(20)))
    assert pop.network.personalize == before + 1  # one fill for the PoP
    items = {str(answer["items"]) for answer in answers}
    assert len(items) == 1  # every user of the segment served that fill's entry
    counters = [edge.fill_leases.counters for edge in pop.edges if edge.fill_leases]
    assert sum(c.led for c in counters) == 1
    assert sum(c.followed for c in counters) == 1  # the other process's leader followed
    assert sum(edge.counters.fills for edge in pop.edges) == 1
    text = (await pop.clients[0].get("/metrics")).text
    assert 'perso_edge_pop_fills_total{outcome="led"' in text
