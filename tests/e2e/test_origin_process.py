"""The origin as its own process over real HTTP: the full ranking path, learning from
feedback, and its degraded answers when Redis goes away under it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis import Redis as SyncRedis
from redis.asyncio import Redis

from config.settings import Settings
from origin.catalog.ingest import ensure_sample_catalog
from perso.redis_server import RedisServer
from protocol import keys
from protocol.api import PersonalizeResponse
from protocol.decisions import DECISION_FIELD, Decision, decode_entry
from tests.e2e.conftest import STARTUP_TIMEOUT_S, free_port_run, perso_env
from tests.readiness import wait_ready

pytestmark = pytest.mark.e2e

TOKEN = "e2e-service-token"


@dataclass
class OriginProcess:
    url: str
    redis: RedisServer
    process: subprocess.Popen[bytes]
    output: Path


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OriginProcess]:
    data_dir = tmp_path_factory.mktemp("origin")
    server = RedisServer(data_dir / "redis", persistent=False).start()
    env = perso_env(data_dir, REDIS_URL=server.url, PERSO_ORIGIN_TOKEN=TOKEN)
    settings = Settings(
        data_dir=data_dir, catalog_size=1000, embedding_dim=32, redis_url=server.url
    )

    async def ingest() -> None:
        client = Redis.from_url(server.url)
        try:
            await ensure_sample_catalog(settings, client)
        finally:
            await client.aclose()

    asyncio.run(ingest())
    port = free_port_run(1)
    output = data_dir / "origin.out"
    with output.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "perso", "origin", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process, output, timeout_s=STARTUP_TIMEOUT_S)
        yield OriginProcess(url, server, process, output)
    finally:
        process.terminate()
        process.wait(timeout=30)
        server.stop()


def post(origin: OriginProcess, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{origin.url}{path}",
        json=body,
        headers={"authorization": f"Bearer {TOKEN}"},
        timeout=5.0,
    )


def body(user: str, **parts: Any) -> dict[str, Any]:
    return {"user_id": user, "context": {"page_type": "home", "device": "mobile"}, **parts}


def test_every_field_of_the_contract_is_filled(origin: OriginProcess) -> None:
    response = post(
        origin,
        "/v1/personalize",
        body(
            "e2e-1",
            constraints={"count": 12, "price_range": {"min": 5, "max": 500}},
            options={"include_explanation": True, "exploration_rate": 0.5, "diversity_weight": 0.5},
        ),
    )
    assert response.status_code == 200, response.text
    answer = PersonalizeResponse.model_validate_json(response.content)
    assert len(answer.items) == 12
    assert answer.metadata.tier == "origin"
    assert answer.metadata.latency_ms > 0
    assert answer.metadata.exploration_applied == any(
        i.source == "exploration" for i in answer.items
    )
    categories = [i.metadata.category for i in answer.items]
    assert max(categories.count(c) for c in categories) <= 6  # diversity 0.5 over 12
    for item in answer.items:
        assert 5 <= item.metadata.price <= 500
        assert item.explanation is not None
        assert item.explanation.primary_reason
        assert item.explanation.signals
        assert item.explanation.llm_generated is False


def test_without_the_service_token_the_answer_is_401(origin: OriginProcess) -> None:
    response = httpx.post(f"{origin.url}/v1/personalize", json=body("e2e-2"), timeout=5.0)
    assert response.status_code == 401
    assert response.json()["field"] == "authorization"


def test_feedback_is_recorded_and_the_decision_logged(origin: OriginProcess) -> None:
    first = post(origin, "/v1/personalize", body("e2e-3"))
    answer = PersonalizeResponse.model_validate_json(first.content)
    clicked = answer.items[3]
    feedback = [
        {"item_id": clicked.item_id, "action": "click", "interaction_id": f"e2e-3-{k}"}
        for k in range(2)
    ]
    ack = post(
        origin,
        "/v1/feedback",
        {"user_id": "e2e-3", "request_id": answer.request_id, "feedback": feedback},
    )
    assert ack.status_code == 200, ack.text
    redis = SyncRedis.from_url(origin.redis.url)
    try:
        # the interactions are in the user's history, the events in their stream
        assert redis.zcard(keys.user_interactions("e2e-3")) == 2
        # the answer the origin served is a decision with its propensities
        mine: list[Decision] = []
        for _ in range(50):  # the log is flushed every 100 ms
            logged = [
                d
                for stream in keys.decisions_streams(8)
                for _, fields in redis.xrange(stream)
                for d in decode_entry(fields[DECISION_FIELD])
            ]
            mine = [d for d in logged if d.request_id == answer.request_id]
            if mine:
                break
            time.sleep(0.1)
        assert len(mine) == 1
        assert [s.item_id for s in mine[0].shown] == [i.item_id for i in answer.items]
        assert all(0 < s.propensity <= 1 for s in mine[0].shown)
    finally:
        redis.close()


def test_with_redis_stopped_answers_degrade_and_feedback_is_refused(
    origin: OriginProcess,
) -> None:
    # Runs last in this module: it stops the Redis the origin depends on.
    origin.redis.stop()
    response = post(origin, "/v1/personalize", body("e2e-4"))
    assert response.status_code == 200
    answer = PersonalizeResponse.model_validate_json(response.content)
    assert answer.metadata.degraded is True
    assert len(answer.items) == 20
    assert {i.source for i in answer.items} == {"trending"}
    refused = post(
        origin,
        "/v1/feedback",
        {"user_id": "e2e-4", "feedback": [{"item_id": "x", "action": "view"}]},
    )
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert httpx.get(f"{origin.url}/readyz", timeout=5.0).status_code == 200  # answers
    found = httpx.get(f"{origin.url}/dependencies", timeout=5.0).json()["dependencies"]
    assert found["redis"]["up"] is False
    assert origin.process.poll() is None  # still serving
