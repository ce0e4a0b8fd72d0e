"""An edge in front of two real origin apps, each served by uvicorn on its own loopback
port (over the suite's Redis): one origin is stopped, the edge keeps answering from the
other with no 5xx, and takes the first back once it listens again (issue 20)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest
import uvicorn
from fastapi import FastAPI
from redis.asyncio import Redis

from config.settings import Settings
from edge.app import create_app as create_edge
from edge.node import Edge
from edge.origins.link import OriginLink
from origin.app import create_app as create_origin
from origin.catalog.ingest import ensure_sample_catalog
from protocol.api import PersonalizeResponse
from protocol.segments import Segment
from tests.apps import serving
from tests.credentials import bearer, user_token

# Bounds of every wait below: the test never hangs on a server that does not come.
WAIT_S = 10.0
CHECK_INTERVAL_S = 0.1


class OriginServer:
    """One origin app behind uvicorn on a fixed loopback port, stopped and started again at
    will (the app's lifespan runs once, outside: a restart is the socket coming back)."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # The same port again after a stop, as a restarted origin would have.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            lifespan="off",
            ws="none",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        self._server = server
        self._task = asyncio.create_task(server.serve(sockets=[sock]))
        await until(lambda: server.started, "the origin's server to start")

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        await asyncio.wait_for(self._task, WAIT_S)
        self._server = self._task = None


async def until(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {WAIT_S} s for {what}")
        await asyncio.sleep(0.02)


@dataclass
class Deployment:
    client: httpx.AsyncClient
    edge: Edge
    origins: tuple[OriginServer, OriginServer]
    statuses: list[int]

    def link(self, n: int) -> OriginLink:
        return self.edge.origin.links[n]

    async def personalize(self, user_id: str) -> PersonalizeResponse:
        """A power user's first request: a personal key, so a miss the origin answers."""
        token = user_token(user_id, now_s=time.time(), segment=Segment.POWER)
        body = {"user_id": user_id, "context": {"page_type": "home", "device": "mobile"}}
        response = await self.client.post("/v1/personalize", json=body, headers=bearer(token))
        self.statuses.append(response.status_code)
        assert response.status_code == 200, response.text
        return PersonalizeResponse.model_validate_json(response.content)

    async def feedback(self, user_id: str, item_id: str) -> None:
        """Forwarded to an origin every time: the edge has nothing to answer it with."""
        token = user_token(user_id, now_s=time.time(), segment=Segment.POWER)
        body = {"user_id": user_id, "feedback": [{"item_id": item_id, "action": "click"}]}
        response = await self.client.post("/v1/feedback", json=body, headers=bearer(token))
        self.statuses.append(response.status_code)
        assert response.status_code == 200, response.text

    async def traffic(self, tag: str, count: int) -> None:
        """``count`` users, each a personalize miss and a click; every answer the origin's
        own (not a degraded fallback)."""
        for n in range(count):
            answer = await self.personalize(f"{tag}-{n}")
            assert not answer.metadata.degraded
            assert not answer.metadata.cache_hit
            await self.feedback(f"{tag}-{n}", answer.items[0].item_id)

    async def metric(self, name: str, origin: OriginServer) -> float:
        text = (await self.client.get("/metrics")).text
        pattern = rf'^{name}\{{[^}}]*origin="{re.escape(origin.url)}"[^}}]*\}} (\S+)$'
        found = re.search(pattern, text, re.MULTILINE)
        assert found is not None, f"{name} of {origin.url} not in /metrics"
        return float(found.group(1))


@pytest.fixture
async def deployment(
    origin_settings: Settings, redis: Redis, tmp_path: Path
) -> AsyncIterator[Deployment]:
    # Each origin its own Qdrant local-mode path (one process per path), the same catalog.
    second = origin_settings.model_copy(update={"data_dir": tmp_path / "second"})
    await ensure_sample_catalog(second, redis)
    apps = [
        create_origin(settings, rng=np.random.default_rng(7))
        for settings in (origin_settings, second)
    ]
    origins = (OriginServer(apps[0]), OriginServer(apps[1]))
    async with contextlib.AsyncExitStack() as stack:
        for app in apps:
            await stack.enter_async_context(serving(app, "http://origin"))  # the lifespan
        for origin in origins:
            await origin.start()
            stack.push_async_callback(origin.stop)
        edge_settings = origin_settings.model_copy(
            update={
                "origin_urls": (origins[0].url, origins[1].url),
                "origin_health_interval_s": CHECK_INTERVAL_S,
                # Longer than any wait here: an ejection seen stays seen until a check
                # passes (which ends it early: the origin is back).
                "origin_eject_base_s": 30.0,
                "origin_eject_max_s": 60.0,
            }
        )
        edge_app = create_edge(edge_settings, region="us-east")
        client = await stack.enter_async_context(serving(edge_app, "http://edge"))
        yield Deployment(client, edge_app.state.edge, origins, [])


async def test_an_edge_keeps_answering_through_one_origins_outage_and_takes_it_back(
    deployment: Deployment,
) -> None:
    first, second = deployment.origins
    await until(
        lambda: all(link.standing.ready for link in deployment.edge.origin.links),
        "both origins' first health checks",
    )
    # Both origins take calls: fewest in flight first, ties at random.
    await deployment.traffic("before", 12)
    assert deployment.link(0).requests > 0
    assert deployment.link(1).requests > 0

    await first.stop()
    sent_to_second = deployment.link(1).requests
    await deployment.traffic("during", 12)
    # Everything was answered by the second; the first failed its checks and was ejected
    # (a connection refused is retried on the other origin at once, invisible to callers).
    assert deployment.link(1).requests >= sent_to_second + 24
    await until(lambda: deployment.link(0).standing.ready is False, "the failed check")
    assert deployment.link(0).ejected()
    # Out of the rotation: not even tried any more, nobody waits on it.
    outages = deployment.link(0).outages
    await deployment.traffic("while-out", 6)
    assert deployment.link(0).outages == outages
    assert await deployment.metric("perso_edge_origin_up", first) == 0.0
    assert await deployment.metric("perso_edge_origin_ejected", first) == 1.0
    assert await deployment.metric("perso_edge_origin_ejections_total", first) >= 1.0
    assert await deployment.metric("perso_edge_origin_up", second) == 1.0
    dependencies = (await deployment.client.get("/dependencies")).json()
    assert dependencies["dependencies"]["origin"]["up"] is True  # one origin is enough

    # The first listens again: its next health check brings it back into the rotation.
    await first.start()
    await until(lambda: not deployment.link(0).ejected(), "the first origin's return")
    sent_to_first = deployment.link(0).requests
    await deployment.traffic("after", 12)
    assert deployment.link(0).requests > sent_to_first
    assert await deployment.metric("perso_edge_origin_up", first) == 1.0
    assert await deployment.metric("perso_edge_origin_ejected", first) == 0.0
    # No 5xx from the edge, at any point.
    assert deployment.statuses == [200] * 84
