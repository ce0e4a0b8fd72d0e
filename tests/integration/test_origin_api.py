from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from redis.asyncio import Redis

from config.settings import Settings
from origin.app import create_app
from origin.catalog.ingest import ensure_sample_catalog
from origin.catalog.sample import generate
from origin.learned.posteriors import PosteriorStore
from origin.learned.user_models import UserRecord, encode_record
from perso.redis_server import RedisServer
from protocol import keys
from protocol.api import FILL_SCOPE_HEADER, FeedbackResponse, PersonalizeResponse
from protocol.audience import AUDIENCE_HEADER
from protocol.events import decode_event
from relevance.user_model import UserModel
from tests.apps import serving
from tests.fakes import FakeClock


async def set_user_model(redis: Redis, user_id: str, mean: Any) -> None:
    """Store a user whose model the worker learnt: ``mean`` (of its own dimension), certain."""
    vector = np.asarray(mean, dtype=np.float32)
    model = UserModel(vector, np.full(vector.shape, 1e-3, dtype=np.float32))
    record = UserRecord(version=1, model=model)
    await redis.set(keys.user_record(user_id), encode_record(record, vector.shape[0]))


def body(user_id: str = "u-1", **parts: Any) -> dict[str, Any]:
    return {"user_id": user_id, "context": {"page_type": "home", "device": "mobile"}, **parts}


# Exploration off: the ranking is then the deterministic base ranking.
NO_EXPLORATION = {"exploration_rate": 0}


async def personalize(client: httpx.AsyncClient, **kw: Any) -> PersonalizeResponse:
    response = await client.post("/v1/personalize", json=body(**kw))
    assert response.status_code == 200, response.text
    return PersonalizeResponse.model_validate_json(response.content)


async def test_the_origin_says_it_ranked_its_answer(origin: httpx.AsyncClient) -> None:
    response = await origin.post("/v1/personalize", json=body(user_id="nobody"))
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["ranked_by"] == "origin"


async def test_a_cold_user_gets_trending_items(origin: httpx.AsyncClient) -> None:
    answer = await personalize(origin, user_id="nobody", options=NO_EXPLORATION)
    assert len(answer.items) == 20
    assert {i.source for i in answer.items} == {"trending"}
    assert [i.rank for i in answer.items] == list(range(1, 21))
    assert answer.user_id == "nobody"
    meta = answer.metadata
    assert (meta.tier, meta.cache_hit, meta.degraded) == ("origin", False, False)
    assert meta.exploration_applied is False
    assert meta.model_version == "nn-slice-1"
    assert all(i.explanation is None for i in answer.items)


async def test_exploration_is_applied_and_marked_per_item(origin: httpx.AsyncClient) -> None:
    answer = await personalize(origin, user_id="nobody", options={"include_explanation": True})
    explored = [i for i in answer.items if i.source == "exploration"]
    assert answer.metadata.exploration_applied is True
    assert len(explored) >= 1  # the minimum exploration floor: ceil(5 % of 20)
    for item in explored:
        assert item.explanation is not None
        assert "exploration" in item.explanation.signals
    assert len({i.item_id for i in answer.items}) == 20


async def test_a_known_user_gets_items_near_their_embedding(
    origin: httpx.AsyncClient, redis: Redis, origin_settings: Settings
) -> None:
    catalog = generate(origin_settings.catalog_size, origin_settings.catalog_seed, 32)
    anchor = next(i for i, item in enumerate(catalog.items) if item.availability == "in_stock")
    await set_user_model(redis, "u-k", catalog.unified[anchor])
    answer = await personalize(origin, user_id="u-k", options=NO_EXPLORATION)
    assert answer.items[0].item_id == catalog.items[anchor].item_id
    sources = [i.source for i in answer.items]
    assert sources.count("collaborative") >= 15
    rows = [int(i.item_id.removeprefix("it-")) for i in answer.items]
    assert float((catalog.unified[rows] @ catalog.unified[anchor]).mean()) > 0.3


async def test_an_embedding_of_another_dimension_counts_as_none(
    origin: httpx.AsyncClient, redis: Redis
) -> None:
    await set_user_model(redis, "u-old", np.ones(512))
    answer = await personalize(origin, user_id="u-old", options=NO_EXPLORATION)
    assert {i.source for i in answer.items} == {"trending"}
    assert answer.metadata.degraded is False


async def test_segment_fills_ignore_the_users_embedding(
    origin: httpx.AsyncClient, redis: Redis
) -> None:
    await set_user_model(redis, "u-k", np.ones(32))
    response = await origin.post(
        "/v1/personalize",
        json=body("u-k", options={**NO_EXPLORATION, "include_explanation": True}),
        headers={FILL_SCOPE_HEADER: "segment"},
    )
    answer = PersonalizeResponse.model_validate_json(response.content)
    assert {i.source for i in answer.items} == {"trending"}
    personal = {"viewed_similar", "category_match", "previously_engaged", "price_match"}
    for item in answer.items:
        assert item.explanation is not None
        assert not personal & set(item.explanation.signals)


@pytest.mark.parametrize(("scope", "audience"), [("segment", "segment"), (None, "user")])
async def test_every_answer_says_who_it_may_be_served_to(
    origin: httpx.AsyncClient, scope: str | None, audience: str
) -> None:
    headers = {FILL_SCOPE_HEADER: scope} if scope else {}
    response = await origin.post("/v1/personalize", json=body("u-a"), headers=headers)
    assert response.status_code == 200
    assert response.headers[AUDIENCE_HEADER] == audience


async def test_constraints_and_options_are_honoured(origin: httpx.AsyncClient) -> None:
    everything = await personalize(origin, constraints={"count": 100})
    excluded = everything.items[0].item_id
    answer = await personalize(
        origin,
        constraints={
            "count": 7,
            "categories": ["books", "grocery"],
            "price_range": {"min": 5, "max": 30},
            "exclude_items": [excluded],
        },
        options={"include_explanation": True},
    )
    assert len(answer.items) == 7
    assert excluded not in {i.item_id for i in answer.items}
    for item in answer.items:
        assert item.metadata.category in {"Books", "Grocery"}
        assert 5 <= item.metadata.price <= 30
        assert item.explanation is not None
        assert item.explanation.signals
        assert item.explanation.primary_reason
        assert item.explanation.llm_generated is False


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"context": {"page_type": "home", "device": "mobile"}}, "user_id"),
        (body(constraints={"count": 1000}), "constraints.count"),
        (body(context={"page_type": "home", "device": "fridge"}), "context.device"),
        (body(options={"exploration_rate": -1}), "options.exploration_rate"),
    ],
)
async def test_malformed_personalize_is_a_400_naming_the_field(
    origin: httpx.AsyncClient, payload: dict[str, Any], field: str
) -> None:
    response = await origin.post("/v1/personalize", json=payload)
    assert response.status_code == 400
    problem = response.json()
    assert problem["error"] == "invalid_request"
    assert problem["field"] == field
    assert problem["reason"]


@pytest.mark.parametrize(
    ("content", "content_type", "reason"),
    [
        (b"{not json", "application/json", "not valid JSON"),
        (b"[1, 2]", "application/json", "expected a JSON object"),
        (b"", "application/json", ""),
        (b'{"user_id": "u"}', "text/plain", "content-type: application/json"),
        (b"user_id=u", "application/x-www-form-urlencoded", "expected a JSON object"),
        (b'{"user_id": "u", "context": {"page_type": "home", "device": "tv"}, '
         b'"constraints": {"price_range": {"min": 1e400}}}', "application/json", "finite"),
    ],
)  # fmt: skip
async def test_a_body_that_is_not_a_valid_object_is_a_400(
    origin: httpx.AsyncClient, content: bytes, content_type: str, reason: str
) -> None:
    response = await origin.post(
        "/v1/personalize", content=content, headers={"content-type": content_type}
    )
    assert response.status_code == 400
    assert reason in response.json()["reason"]


async def test_a_price_range_with_min_above_max_is_empty_not_an_error(
    origin: httpx.AsyncClient,
) -> None:
    answer = await personalize(origin, constraints={"price_range": {"min": 300, "max": 10}})
    assert answer.items == []


async def test_unknown_routes_are_json_404s(origin: httpx.AsyncClient) -> None:
    response = await origin.get("/v1/nothing")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


async def test_feedback_is_acknowledged_after_it_is_in_the_stream(
    origin: httpx.AsyncClient, redis: Redis
) -> None:
    payload = {
        "user_id": "u-1",
        "session_id": "s-1",
        "request_id": "r-1",
        "feedback": [
            {"item_id": "it-000003", "action": "purchase", "position": 3, "duration_ms": 5000}
        ],
    }
    response = await origin.post("/v1/feedback", json=payload)
    assert response.status_code == 200
    ack = FeedbackResponse.model_validate_json(response.content)
    assert (ack.status, ack.processed) == ("accepted", 1)
    stream = keys.events_stream(keys.partition_of("u-1", 4))
    [(_, fields)] = await redis.xrange(stream)
    event = decode_event(fields[b"e"])
    assert (event.user_id, event.item_id, event.action) == ("u-1", "it-000003", "purchase")
    # the retry is recognised: same answer, nothing appended
    again = await origin.post("/v1/feedback", json=payload)
    assert again.json()["processed"] == 1
    assert await redis.xlen(stream) == 1


async def test_malformed_feedback_is_a_400(origin: httpx.AsyncClient) -> None:
    response = await origin.post(
        "/v1/feedback", json={"user_id": "u", "feedback": [{"item_id": "x", "action": "love"}]}
    )
    assert response.status_code == 400
    assert response.json()["field"] == "feedback[0].action"


async def test_health_and_readiness(origin: httpx.AsyncClient) -> None:
    assert (await origin.get("/healthz")).json() == {"status": "ok"}
    ready = await origin.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"catalog_items": 500}
    found = await origin.get("/dependencies")
    assert found.status_code == 200
    assert found.json()["dependencies"] == {
        "redis": {"up": True},
        "vector_store": {"up": True},
        "llm": {"up": False, "configured": False},
    }
    metrics = (await origin.get("/metrics")).text
    assert 'perso_origin_dependency_up{dependency="redis"} 1.0' in metrics


async def own_redis(
    tmp_path: Path, make_settings: Callable[..., Settings]
) -> tuple[RedisServer, Settings]:
    """A Redis of the test's own (to stop or kill), the sample catalog in it, and the
    settings of an origin on it."""
    server = RedisServer(tmp_path / "own-redis", persistent=False).start()
    settings = make_settings(redis_url=server.url)
    client = Redis.from_url(server.url)
    await ensure_sample_catalog(settings, client)
    await client.aclose()
    return server, settings


async def test_without_redis_personalize_degrades_and_feedback_is_refused(
    tmp_path: Path, make_settings: Callable[..., Settings]
) -> None:
    server, settings = await own_redis(tmp_path, make_settings)
    try:
        async with serving(create_app(settings), "http://origin") as origin:
            server.stop()
            answer = await personalize(origin, user_id="u-1")
            assert answer.metadata.degraded is True
            assert len(answer.items) == 20
            assert {i.source for i in answer.items} == {"trending"}
            refused = await origin.post(
                "/v1/feedback",
                json={"user_id": "u-1", "feedback": [{"item_id": "it-1", "action": "view"}]},
            )
            assert refused.status_code == 503
            assert refused.headers["retry-after"] == "1"
            assert refused.json()["error"] == "unavailable"
            # Still ready: it answers (degraded), and every origin shares that Redis.
            assert (await origin.get("/readyz")).status_code == 200
            found = (await origin.get("/dependencies")).json()["dependencies"]
            assert found["redis"] == {"up": False}
            metrics = (await origin.get("/metrics")).text
            assert 'perso_origin_dependency_up{dependency="redis"} 0.0' in metrics
    finally:
        server.stop()


async def test_feedback_waits_out_a_short_redis_outage_and_is_appended_once(
    tmp_path: Path, make_settings: Callable[..., Settings]
) -> None:
    """A Redis gone for half a second (a failover's promotion window, a restart) makes a
    feedback slower, not refused: the origin tries its append again within
    PERSO_FEEDBACK_RETRY_MS, and what it appends is there once."""
    server, settings = await own_redis(tmp_path, make_settings)
    try:
        async with serving(create_app(settings), "http://origin") as origin:
            server.kill()

            async def back_soon() -> None:
                await asyncio.sleep(0.5)
                await asyncio.to_thread(server.relaunch)

            returning = asyncio.create_task(back_soon())
            started = time.perf_counter()
            answer = await origin.post(
                "/v1/feedback",
                json={"user_id": "u-1", "feedback": [{"item_id": "it-1", "action": "click"}]},
            )
            await returning
            assert answer.status_code == 200, answer.text
            assert time.perf_counter() - started >= 0.5
            stream = keys.events_stream(keys.partition_of("u-1", settings.event_partitions))
            client = Redis.from_url(server.url)
            events = [decode_event(f[b"e"]) for _, f in await client.xrange(stream)]
            await client.aclose()
            assert [(e.user_id, e.item_id) for e in events] == [("u-1", "it-1")]
    finally:
        server.stop()


async def test_a_posterior_store_that_never_answers_costs_a_request_its_timeouts_only(
    origin_settings: Settings,
) -> None:
    """The learned rank and the posteriors each wait 100 ms, then the request is answered
    without them (degraded), not held until the store answers."""

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(-1)  # reads every command, answers none
        writer.close()

    silent = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    clock = FakeClock(1_767_294_000.0)
    app = create_app(origin_settings, clock=clock)
    stalled = Redis(host="127.0.0.1", port=port)
    try:
        async with serving(app, "http://origin") as origin:
            await personalize(origin, user_id="u-1")  # the learned rank read once
            runtime = app.state.origin
            runtime.posteriors = PosteriorStore(stalled, runtime.posteriors.config)
            clock.tick(5.0)  # the learned rank is due to be read again
            started = time.perf_counter()
            answer = await personalize(origin, user_id="u-1")
            took = time.perf_counter() - started
            assert answer.metadata.degraded is True
            assert len(answer.items) == 20
            assert took < 5.0, took  # two 100 ms timeouts, not the store's silence
    finally:
        await stalled.aclose()
        silent.close()
