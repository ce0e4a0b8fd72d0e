"""An edge and an origin as real processes; the origin is stopped in the middle of the
traffic and started again. Cacheable requests never get a 5xx while the edge has a stale
entry or its popular list (on its cache path), or a pool to rank from (ranking at the edge,
the default); once the origin is back, the edge fills from it again."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from config.settings import Settings
from origin.catalog.ingest import ensure_sample_catalog
from perso.redis_server import RedisServer
from protocol.identity import Claims, issue
from protocol.segments import Segment
from tests.e2e.conftest import STARTUP_TIMEOUT_S, free_port_run, perso_env

pytestmark = pytest.mark.e2e

IDENTITY_KEY = "e2e-identity-key-0123456789"


def start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "perso", *argv], env=env, stdout=out, stderr=subprocess.STDOUT
        )


async def wait_ready(
    url: str,
    process: subprocess.Popen[bytes],
    log: Path,
    *,
    verify: ssl.SSLContext | bool = True,
    path: str = "/readyz",
) -> None:
    """Until ``url``'s ``path`` answers 200 (``verify``: what an https URL's certificate
    is checked with)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    async with httpx.AsyncClient(timeout=1.0, verify=verify) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail(f"exited:\n{tail(log)}")
            try:
                if (await client.get(f"{url}{path}")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    pytest.fail(f"not ready:\n{tail(log)}")


def tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:]


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        process.wait(timeout=30)


def auth(user: str) -> dict[str, str]:
    now = int(time.time())
    token = issue(
        Claims(user, Segment.NEW, "premium", "e2e", now, now + 3600), IDENTITY_KEY.encode()
    )
    return {"authorization": f"Bearer {token}"}


def body(user: str, page: str) -> dict[str, object]:
    return {"user_id": user, "context": {"page_type": page, "device": "desktop"}}


CLICK = {"user_id": "a", "feedback": [{"item_id": "it-000001", "action": "click"}]}


def held_at_the_edge(data_dir: Path) -> int:
    """Feedback requests the edge holds on its disk (``edge.origins.feedback_spool``)."""
    return len(list(data_dir.glob("edge-feedback/*/p-*/*.json")))


async def during_the_outage(client: httpx.AsyncClient, *, ranks_here: bool) -> None:
    served: dict[str, int] = {}
    for n in range(30):
        user = f"out-{n}"
        page = "home" if n % 2 else "search"  # a cached key, and one never filled
        answer = await client.post("/v1/personalize", json=body(user, page), headers=auth(user))
        assert answer.status_code == 200, answer.text
        served[answer.headers["x-cache"]] = served.get(answer.headers["x-cache"], 0) + 1
        metadata = answer.json()["metadata"]
        assert answer.json()["user_id"] == user
        if ranks_here:
            # the segment's pool is at hand whatever the page: ranked here, nothing degraded
            assert (metadata["ranked_by"], metadata["degraded"]) == ("edge", False)
        elif page == "search":
            assert answer.headers["x-cache"] == "STALE"  # the popular list
            assert metadata["degraded"] is True
    assert served == ({"HIT": 30} if ranks_here else {"HIT": 15, "STALE": 15})
    held = await client.post("/v1/feedback", json=CLICK, headers=auth("a"))
    # held on the edge's disk: nothing for the client to resend
    assert (held.status_code, held.json()["status"]) == (202, "held")
    # Ready all along: it answers; the origin's state is in /dependencies.
    assert (await client.get("/readyz")).status_code == 200
    found = (await client.get("/dependencies")).json()["dependencies"]
    assert found["origin"]["up"] is False


@pytest.mark.parametrize("ranks_here", [False, True], ids=["cache-path", "ranked-at-edge"])
async def test_the_edge_rides_out_an_origin_outage(tmp_path: Path, ranks_here: bool) -> None:
    server = RedisServer(tmp_path / "redis", persistent=False).start()
    settings = Settings(
        data_dir=tmp_path, catalog_size=1000, embedding_dim=32, redis_url=server.url
    )
    redis = Redis.from_url(server.url)
    await ensure_sample_catalog(settings, redis)
    await redis.aclose()
    origin_port = free_port_run(2)
    edge_port = origin_port + 1
    origin_url, edge_url = f"http://127.0.0.1:{origin_port}", f"http://127.0.0.1:{edge_port}"
    env = perso_env(
        tmp_path,
        REDIS_URL=server.url,
        PERSO_ORIGIN_URL=origin_url,
        PERSO_ORIGIN_TOKEN="e2e-service-token",
        PERSO_IDENTITY_KEYS=IDENTITY_KEY,
        PERSO_ORIGIN_TIMEOUT_MS="500",
        PERSO_EDGE_RANKING="true" if ranks_here else "false",
    )
    log = tmp_path / "processes.log"
    origin = start(["origin", "--port", str(origin_port)], env, log)
    edge: subprocess.Popen[bytes] | None = None
    try:
        await wait_ready(origin_url, origin, log)
        # as `perso up` does: the edge starts once the origin is ready (its popular list)
        edge = start(["edge", "--region", "us-east", "--port", str(edge_port)], env, log)
        await wait_ready(edge_url, edge, log)
        async with httpx.AsyncClient(base_url=edge_url, timeout=5.0) as client:
            cached = await client.post("/v1/personalize", json=body("a", "home"), headers=auth("a"))
            assert cached.headers["x-cache"] == "MISS"  # the entry, or the pool, filled

            stop(origin)  # mid-run: the origin goes away
            await during_the_outage(client, ranks_here=ranks_here)

            origin = start(["origin", "--port", str(origin_port)], env, log)  # back
            await wait_ready(origin_url, origin, log)
            for _ in range(100):  # the circuit lets a probe through within seconds
                answer = await client.post(
                    "/v1/personalize", json=body("z", "search"), headers=auth("z")
                )
                if answer.headers["x-cache"] in ("MISS", "HIT"):
                    break
                await asyncio.sleep(0.1)
            assert answer.headers["x-cache"] in ("MISS", "HIT")
            assert answer.json()["metadata"]["degraded"] is False
            # what the edge held during the outage is handed on to the origin
            for _ in range(200):
                if not held_at_the_edge(tmp_path):
                    break
                await asyncio.sleep(0.1)
            assert held_at_the_edge(tmp_path) == 0
            metrics = (await client.get("/metrics")).text
            assert 'perso_edge_feedback_spool_total{region="us-east",what="forwarded"} 1.0' in (
                metrics
            )
            accepted = await client.post("/v1/feedback", json=CLICK, headers=auth("a"))
            assert accepted.status_code == 200
    finally:
        if edge is not None:
            stop(edge)
        stop(origin)
        server.stop()
