"""TLS between the parts (issue 30, item 2: ``config/tls.py``): an origin and an edge as real
processes serving HTTPS with certificates made by ``trustme``, the edge verifying the
origin's against the parts' CA file, the origin's operations scraper the edge's. An edge
given another CA does not trust the origin: it fills nothing from it (its misses degrade
to the popular list it could not load either), and says why in /dependencies. A client
that does not trust the CA, or speaks plain HTTP, gets no answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from config.settings import Settings
from origin.catalog.ingest import ensure_sample_catalog
from perso.redis_server import RedisServer
from tests.e2e.conftest import free_port_run, perso_env
from tests.e2e.test_edge_origin_outage import IDENTITY_KEY, auth, body, start, stop, wait_ready
from tests.pki import Pki, make_pki

pytestmark = pytest.mark.e2e

ADMIN = "tls-admin-token"


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    server = RedisServer(tmp_path / "redis", persistent=False).start()
    yield server.url
    server.stop()


async def test_the_parts_speak_https_and_verify_each_other(
    tmp_path: Path, pki: Pki, redis_url: str
) -> None:
    settings = Settings(data_dir=tmp_path, catalog_size=1000, embedding_dim=32, redis_url=redis_url)
    redis = Redis.from_url(redis_url)
    await ensure_sample_catalog(settings, redis)
    await redis.aclose()
    port = free_port_run(3)
    origin_url = f"https://127.0.0.1:{port}"
    edge_url, untrusting_url = f"https://127.0.0.1:{port + 1}", f"https://127.0.0.1:{port + 2}"
    env = perso_env(
        tmp_path,
        REDIS_URL=redis_url,
        PERSO_ORIGIN_URL=origin_url,
        PERSO_ORIGIN_TOKEN="tls-service-token",
        PERSO_ADMIN_TOKEN=ADMIN,
        PERSO_IDENTITY_KEYS=IDENTITY_KEY,
        **pki.env(),
    )
    log = tmp_path / "processes.log"
    processes = [start(["origin", "--port", str(port)], env, log)]
    try:
        await wait_ready(origin_url, processes[0], log, verify=pki.trusted)
        processes.append(start(["edge", "--region", "us-east", "--port", str(port + 1)], env, log))
        await wait_ready(edge_url, processes[1], log, verify=pki.trusted)
        async with httpx.AsyncClient(timeout=10.0, verify=pki.trusted) as client:
            # a miss filled from the origin, over HTTPS, the origin's certificate verified
            answer = await client.post(
                f"{edge_url}/v1/personalize", json=body("tls-1", "home"), headers=auth("tls-1")
            )
            assert answer.status_code == 200, answer.text
            assert answer.headers["x-cache"] == "MISS"
            assert answer.json()["metadata"]["degraded"] is False
            # the operations page's scraper reads the edge's /metrics over HTTPS
            report = await client.get(
                f"{origin_url}/v1/admin/ops", headers={"authorization": f"Bearer {ADMIN}"}
            )
            assert report.status_code == 200, report.text
            edges = report.json()["edges"]
            assert [(e["url"], e["status"]) for e in edges] == [(edge_url, "up")]
        # neither an untrusting client nor plain HTTP gets an answer
        async with httpx.AsyncClient(timeout=5.0) as stranger:
            with pytest.raises(httpx.ConnectError):
                await stranger.get(f"{edge_url}/readyz")
            with pytest.raises(httpx.HTTPError):
                await stranger.get(f"http://127.0.0.1:{port + 1}/readyz")
        # an edge that trusts another CA does not take the origin's certificate
        untrusting = {**env, "PERSO_TLS_CA_FILE": str(pki.other_ca)}
        edge_args = ["edge", "--region", "us-east", "--port", str(port + 2)]
        processes.append(start(edge_args, untrusting, log))
        # alive, never ready: neither the origin nor a popular list from it
        await wait_ready(untrusting_url, processes[2], log, verify=pki.trusted, path="/healthz")
        async with httpx.AsyncClient(timeout=10.0, verify=pki.trusted) as client:
            found = (await client.get(f"{untrusting_url}/dependencies")).json()
            assert found["dependencies"]["origin"]["up"] is False
            refused = await client.post(
                f"{untrusting_url}/v1/personalize",
                json=body("tls-2", "search"),
                headers=auth("tls-2"),
            )
            assert refused.status_code == 503, refused.text
        assert "CERTIFICATE_VERIFY_FAILED" in log.read_text(errors="replace")
    finally:
        for process in reversed(processes):
            stop(process)
