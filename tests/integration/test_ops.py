"""The operations page's data route (``GET /v1/admin/ops``) over real HTTP: an origin and
two edges served by uvicorn on loopback, over the suite's Redis, each registered by its
own heartbeat (``coordination.registry``); the route scrapes their real ``/metrics``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from config.settings import Settings
from coordination.registry import Registered
from edge.app import create_app as create_edge
from origin.app import create_app as create_origin
from origin.catalog.ingest import ensure_sample_catalog
from origin.offline import last_evaluation
from origin.offline.last_evaluation import Estimated, LastEvaluation
from perso.process import free_port
from perso.user_tokens import UserTokens
from protocol import keys
from redis_client.client import RedisClient
from tests.apps import listening
from tests.credentials import API_SECRETS

ADMIN = "ops-admin-token"
SERVICE = "ops-service-token"
ADMIN_HEADERS = {"authorization": f"Bearer {ADMIN}"}
REGIONS = ("us-east", "eu-west")

# The registry and the learning curve share one hash tag: the same on a Redis Cluster.
pytestmark = pytest.mark.cluster


@dataclass
class Deployment:
    origin: str
    edges: dict[str, str]  # region -> URL
    client: httpx.AsyncClient

    async def report(self) -> dict[str, Any]:
        answer = await self.client.get(self.origin + "/v1/admin/ops", headers=ADMIN_HEADERS)
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body


@pytest.fixture
async def deployment(
    redis: RedisClient, redis_url: str, make_settings: Callable[..., Settings]
) -> AsyncIterator[Deployment]:
    origin_port = free_port()
    origin_url = f"http://127.0.0.1:{origin_port}"
    common: dict[str, object] = {
        "redis_url": redis_url,
        "event_partitions": 4,
        "admin_token": ADMIN,
        "origin_token": SERVICE,
        "regions": REGIONS,
    }
    origin_settings = make_settings(**common, advertise_url=origin_url)
    await ensure_sample_catalog(origin_settings, redis)
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(listening(create_origin(origin_settings), origin_port))
        edges = {}
        for region in REGIONS:
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            settings = make_settings(**common, origin_url=origin_url, advertise_url=url)
            await stack.enter_async_context(listening(create_edge(settings, region=region), port))
            edges[region] = url
        client = await stack.enter_async_context(httpx.AsyncClient(timeout=10.0))
        yield Deployment(origin_url, edges, client)


async def traffic(deployment: Deployment, region: str, requests: int) -> None:
    """Personalize requests of a few users at ``region``'s edge, each answered 200."""
    tokens = UserTokens(deployment.origin, API_SECRETS["premium"])
    for n in range(requests):
        user = f"ops-{n % 5}"
        answer = await deployment.client.post(
            deployment.edges[region] + "/v1/personalize",
            json={"user_id": user, "context": {"page_type": "home", "device": "mobile"}},
            headers=await tokens.headers(deployment.client, user),
        )
        assert answer.status_code == 200, answer.text


async def test_without_the_admin_token_it_is_401(deployment: Deployment) -> None:
    for headers in ({}, {"authorization": "Bearer nope"}, {"authorization": f"Bearer {SERVICE}"}):
        answer = await deployment.client.get(deployment.origin + "/v1/admin/ops", headers=headers)
        assert answer.status_code == 401
        assert answer.json()["field"] == "authorization"


async def test_the_page_shell_is_public_and_holds_no_figure(deployment: Deployment) -> None:
    page = await deployment.client.get(deployment.origin + "/ops")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert 'type="password"' in page.text
    again = await deployment.client.get(
        deployment.origin + "/ops", headers={"if-none-match": page.headers["etag"]}
    )
    assert again.status_code == 304
    script = await deployment.client.get(deployment.origin + "/ops/ops.js")
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"
    # Nothing else under /ops/ is open: an unknown file needs a credential like any path.
    assert (await deployment.client.get(deployment.origin + "/ops/secrets.txt")).status_code == 401


async def test_every_process_is_found_and_measured(deployment: Deployment) -> None:
    first = await deployment.report()
    assert sorted(e["url"] for e in first["edges"]) == sorted(deployment.edges.values())
    assert [o["url"] for o in first["origins"]] == [deployment.origin]
    assert all(p["status"] == "up" for p in first["edges"] + first["origins"])
    assert first["edges"][0]["requests_per_s"] is None  # one scrape: no rate yet
    await traffic(deployment, "us-east", 12)
    await asyncio.sleep(1.1)  # rates over at least a second (ops_scrape.MIN_INTERVAL_S)
    second = await deployment.report()
    by_region = {r["region"]: r for r in second["regions"]}
    assert by_region["us-east"]["requests_per_s"] > 0
    assert by_region["us-east"]["p99_ms"] is not None
    assert 0.0 <= by_region["us-east"]["no_origin_share"] < 1.0  # the first asked the origin
    assert by_region["eu-west"]["requests_per_s"] == 0.0
    us_east = next(e for e in second["edges"] if e["region"] == "us-east")
    assert us_east["breaker"] == "closed"
    assert us_east["sync_gaps"] == 0
    assert second["workers"] is not None
    assert second["workers"]["from"] == deployment.origin


async def test_a_dead_process_is_unreachable_and_the_others_still_show(
    deployment: Deployment, redis: RedisClient
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    seen_ms = int(time.time() * 1000) - 30_000
    gone = Registered("edge-ap-south", "edge", "ap-south", dead, seen_ms)
    await redis.hset(keys.process_registry(), dead, gone.encode())
    await deployment.report()
    await traffic(deployment, "eu-west", 3)
    await asyncio.sleep(1.1)
    report = await deployment.report()
    rows = {e["url"]: e for e in report["edges"]}
    assert rows[dead]["status"] == "unreachable"
    assert rows[dead]["error"].startswith("unreachable")
    assert rows[dead]["silent"]
    assert rows[dead]["seen_s_ago"] >= 30
    assert all(rows[url]["status"] == "up" for url in deployment.edges.values())
    regions = {r["region"]: r for r in report["regions"]}
    assert regions["ap-south"]["up"] == 0
    assert regions["ap-south"]["requests_per_s"] is None
    assert regions["eu-west"]["requests_per_s"] > 0  # the others keep their figures


async def test_a_process_silent_for_minutes_is_forgotten(
    deployment: Deployment, redis: RedisClient
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    long_ago = int(time.time() * 1000) - (keys.REGISTRY_FORGET_S + 5) * 1000
    await redis.hset(
        keys.process_registry(), url, Registered("old", "edge", "x", url, long_ago).encode()
    )
    report = await deployment.report()
    assert url not in {e["url"] for e in report["edges"]}
    assert not await redis.hexists(keys.process_registry(), url)


async def test_the_learning_curve_is_read_by_minute(
    deployment: Deployment, redis: RedisClient
) -> None:
    minute = int(time.time() // 60)
    await redis.hset(keys.learning_curve(minute - 1), mapping={"slates": 40, "clicks": 10})
    await redis.hset(keys.learning_curve(minute), mapping={"slates": 10, "clicks": 4})
    report = await deployment.report()
    assert [(p["slates"], p["clicks_per_slate"]) for p in report["learning_curve"]] == [
        (40, 0.25),
        (10, 0.4),
    ]


async def test_a_cleanly_stopped_process_leaves_the_registry(
    redis: RedisClient, redis_url: str, make_settings: Callable[..., Settings]
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    settings = make_settings(redis_url=redis_url, origin_token=SERVICE, advertise_url=url)
    async with listening(create_edge(settings, region="us-east"), port):
        for _ in range(50):
            if await redis.hexists(keys.process_registry(), url):
                break
            await asyncio.sleep(0.1)
        assert await redis.hexists(keys.process_registry(), url)
    assert not await redis.hexists(keys.process_registry(), url)


async def test_the_last_evaluation_is_shown_from_the_origins_metrics(
    deployment: Deployment, redis: RedisClient
) -> None:
    assert (await deployment.report())["last_evaluation"] is None
    kept = LastEvaluation(
        1_795_000_000_000,
        "configured/1",
        0.21,
        480,
        (
            Estimated("random/ref", "snips", 0.12, 0.08, 0.16),
            Estimated("popular/ref", "snips", 0.25, 0.2, 0.31),
        ),
    )
    await last_evaluation.store(redis, kept)
    metrics = await deployment.client.get(deployment.origin + "/metrics")
    assert 'perso_evaluation_last_engagement{estimator="snips",policy="random/ref"} 0.12' in (
        metrics.text
    )
    shown = (await deployment.report())["last_evaluation"]
    assert shown["at_ms"] == kept.at_ms
    assert (shown["live"], shown["live_engagement"], shown["joined"]) == ("configured/1", 0.21, 480)
    assert [(e["policy"], e["value"], e["low"], e["high"]) for e in shown["estimates"]] == [
        ("popular/ref", 0.25, 0.2, 0.31),
        ("random/ref", 0.12, 0.08, 0.16),
    ]


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://169.254.169.254", "refused: 169.254.169.254 is outside PERSO_OPS_SCRAPE_NETWORKS"),
        ("http://192.0.2.7:9100", "refused: 192.0.2.7 is outside PERSO_OPS_SCRAPE_NETWORKS"),
        ("http://u:p@127.0.0.1:9", "refused: not an http(s) URL without credentials"),
        ("file:///etc/passwd", "refused: not an http(s) URL without credentials"),
    ],
)
async def test_a_registered_url_outside_the_scrape_networks_is_refused_unfetched(
    deployment: Deployment, redis: RedisClient, url: str, why: str
) -> None:
    """Whoever writes the registry cannot send the origin's scraper anywhere: a metadata
    service, another network's host, a URL with credentials or another scheme are shown
    refused, with the reason (a fetch would have said "unreachable")."""
    now_ms = int(time.time() * 1000)
    await redis.hset(
        keys.process_registry(), url, Registered("planted", "edge", "x", url, now_ms).encode()
    )
    report = await deployment.report()
    [row] = [e for e in report["edges"] if e["url"] == url]
    assert (row["status"], row["error"]) == ("unreachable", why)
    assert all(e["status"] == "up" for e in report["edges"] if e["url"] != url)


async def test_with_other_scrape_networks_even_loopback_is_not_fetched(
    redis: RedisClient, redis_url: str, make_settings: Callable[..., Settings]
) -> None:
    """An origin allowed 10.0.0.0/8 alone: a listener on loopback, registered, gets no
    request (counted by the listener itself), and the origin's own entry is refused too."""
    hits: list[str] = []

    async def metrics(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hits.append((await reader.readline()).decode())
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(metrics, "127.0.0.1", 0)
    planted = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    port = free_port()
    origin_url = f"http://127.0.0.1:{port}"
    settings = make_settings(
        redis_url=redis_url,
        admin_token=ADMIN,
        origin_token=SERVICE,
        advertise_url=origin_url,
        ops_scrape_networks="10.0.0.0/8",
    )
    await ensure_sample_catalog(settings, redis)
    now_ms = int(time.time() * 1000)
    await redis.hset(
        keys.process_registry(),
        planted,
        Registered("planted", "edge", "x", planted, now_ms).encode(),
    )
    async with (
        listener,
        listening(create_origin(settings), port),
        httpx.AsyncClient(timeout=10.0) as client,
    ):
        answer = await client.get(origin_url + "/v1/admin/ops", headers=ADMIN_HEADERS)
    assert answer.status_code == 200, answer.text
    rows = {e["url"]: e for e in answer.json()["edges"] + answer.json()["origins"]}
    refused = "refused: 127.0.0.1 is outside PERSO_OPS_SCRAPE_NETWORKS"
    assert rows[planted]["error"] == refused
    assert rows[origin_url]["error"] == refused
    assert hits == []
