"""``POST /v1/explain`` on the origin, through the whole LLM tier, against the fake
OpenAI-compatible server in its own process (``tests/llm_server.py``) told to answer well,
slowly, with invalid JSON, with 429, with 503 or not at all: every row of seed 000's LLM
failure table ends in a template within the latency budget, never a 5xx."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from config.settings import Settings
from origin.app import Origin, create_app
from origin.catalog.ingest import ensure_sample_catalog
from origin.catalog.item_index import Filters
from origin.catalog.own_catalog import start_own_catalog
from origin.http.feature_reads import read_user
from origin.llm import precompute as llm_precompute
from origin.llm.speculation import Speculation
from origin.ranking.emotion import NEUTRAL
from origin.ranking.retrieval import retrieve
from protocol import keys
from protocol.api import (
    EXPLAIN_SCOPE_HEADER,
    FILL_SCOPE_HEADER,
    SEGMENT_HEADER,
    SEGMENT_SCOPE,
    PageType,
)
from tests.apps import serving
from tests.llm_fixtures import LlmServer

TIMEOUT_MS = 300


async def settle(settings_factory: Callable[..., Settings], redis: Redis, **kw: Any) -> Settings:
    settings = settings_factory(
        event_partitions=2,
        text_encoder="hashing",
        catalog_size=200,
        llm_timeout_ms=TIMEOUT_MS,
        **{"llm_precompute_every_s": 0, **kw},
    )
    await ensure_sample_catalog(settings, redis)
    return settings


@pytest.fixture
async def app(
    redis: Redis, redis_url: str, make_settings: Callable[..., Settings], llm: LlmServer
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    settings = await settle(make_settings, redis, redis_url=redis_url, llm_base_url=llm.base_url)
    application = create_app(settings)
    async with serving(application, "http://origin") as client:
        yield application, client


def origin_of(app: FastAPI) -> Origin:
    origin: Origin = app.state.origin
    return origin


async def make_active(redis: Redis, client: httpx.AsyncClient, user: str, items: list[str]) -> None:
    """Enough feedback today to make ``user`` an active user (a personal explanation)."""
    feedback = [{"item_id": i, "action": "click"} for i in items]
    answer = await client.post("/v1/feedback", json={"user_id": user, "feedback": feedback})
    assert answer.status_code == 200, answer.text


async def explain(
    client: httpx.AsyncClient, user: str, item: str, style: str = "concise", **headers: str
) -> httpx.Response:
    return await client.post(
        "/v1/explain",
        json={
            "user_id": user,
            "item_id": item,
            "context": {"page_type": "item_detail", "explanation_style": style},
        },
        headers=headers,
    )


def item_ids(app: FastAPI, n: int) -> list[str]:
    """``n`` items of one category: interest in the others makes the first a category
    match (a trending pick would be "simple" and explained by templates, as seed 000 says)."""
    items = origin_of(app).index.items
    by_category: dict[str, list[str]] = {}
    for item in items:
        by_category.setdefault(item.category, []).append(item.item_id)
    return next(ids[:n] for ids in by_category.values() if len(ids) >= n)


async def test_an_active_user_gets_a_personal_llm_explanation(
    app: tuple[FastAPI, httpx.AsyncClient], redis: Redis, llm: LlmServer
) -> None:
    application, client = app
    items = item_ids(application, 6)
    await make_active(redis, client, "u-active", items[1:5])
    answer = await explain(client, "u-active", items[0], "detailed")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["item_id"] == items[0]
    explanation = body["explanation"]
    assert explanation["llm_generated"] is True
    assert explanation["headline"]
    assert all(0 <= f["weight"] <= 1 and f["factor"] for f in explanation["factors"])
    assert EXPLAIN_SCOPE_HEADER not in answer.headers  # personal: no edge may share it
    stats = await llm.stats()
    assert stats["requests"] == 1
    # The same question again: the prompt cache answers, the server is not asked.
    await origin_of(application).llm.flush()
    again = await explain(client, "u-active", items[0], "detailed")
    assert again.json()["explanation"] == explanation
    assert (await llm.stats())["requests"] == 1


async def test_a_new_user_gets_a_segment_explanation_shared_by_the_segment(
    app: tuple[FastAPI, httpx.AsyncClient], llm: LlmServer
) -> None:
    application, client = app
    items = item_ids(application, 2)
    first = await explain(client, "u-new-1", items[0])
    assert first.status_code == 200
    assert first.headers[EXPLAIN_SCOPE_HEADER] == f"{SEGMENT_SCOPE}:new"
    served = (await llm.stats())["requests"]
    await origin_of(application).llm.flush()
    # Another new user, same category and source: the response cache answers.
    second = await explain(client, "u-new-2", items[0])
    assert second.json()["explanation"] == first.json()["explanation"]
    assert (await llm.stats())["requests"] == served
    # What the model was told for a segment carries no user id.
    assert "u-new-1" not in str(await llm.stats())


async def test_an_edge_fill_is_explained_for_the_segment_it_names(
    app: tuple[FastAPI, httpx.AsyncClient], redis: Redis
) -> None:
    application, client = app
    items = item_ids(application, 6)
    await make_active(redis, client, "u-fill", items[1:5])
    answer = await explain(
        client,
        "u-fill",
        items[0],
        **{FILL_SCOPE_HEADER: SEGMENT_SCOPE, SEGMENT_HEADER: "casual"},
    )
    assert answer.headers[EXPLAIN_SCOPE_HEADER] == f"{SEGMENT_SCOPE}:casual"


@pytest.mark.parametrize(
    ("control", "reason"),
    [
        ({"mode": "slow", "delay_ms": [TIMEOUT_MS + 200, TIMEOUT_MS + 300]}, "timeout"),
        # an answer from the slow tail (benchmarks.llm_overhead's fallback phase has one)
        ({"tail_share": 1.0, "tail_ms": [TIMEOUT_MS + 200, TIMEOUT_MS + 300]}, "timeout"),
        ({"mode": "hang"}, "timeout"),
        ({"mode": "invalid_json"}, "invalid_response"),
        # Parseable, but cut at max_tokens: not the whole answer.
        ({"mode": "length"}, "invalid_response"),
        ({"mode": "rate_limited"}, "rate_limited"),
        ({"mode": "down"}, "unavailable"),
    ],
)
async def test_every_failure_of_the_model_ends_in_a_template_within_the_budget(
    app: tuple[FastAPI, httpx.AsyncClient],
    redis: Redis,
    llm: LlmServer,
    control: dict[str, Any],
    reason: str,
) -> None:
    application, client = app
    items = item_ids(application, 6)
    await make_active(redis, client, "u-fail", items[1:5])
    await llm.control(**control)
    started = time.perf_counter()
    answer = await explain(client, "u-fail", items[0])
    took_ms = (time.perf_counter() - started) * 1000
    assert answer.status_code == 200
    explanation = answer.json()["explanation"]
    assert explanation["llm_generated"] is False
    assert explanation["headline"]
    assert took_ms < TIMEOUT_MS + 150  # the deadline holds, whatever the server does
    fallbacks = origin_of(application).llm.counters.fallbacks
    assert fallbacks[reason] == 1, dict(fallbacks)


async def test_invalid_json_once_is_retried_and_succeeds(
    app: tuple[FastAPI, httpx.AsyncClient], redis: Redis, llm: LlmServer
) -> None:
    application, client = app
    items = item_ids(application, 6)
    await make_active(redis, client, "u-retry", items[1:5])
    await llm.control(mode="good", invalid_times=1)
    answer = await explain(client, "u-retry", items[0])
    assert answer.json()["explanation"]["llm_generated"] is True
    assert (await llm.stats())["requests"] == 2


async def test_a_spent_budget_degrades_to_templates_without_asking_the_model(
    app: tuple[FastAPI, httpx.AsyncClient], redis: Redis, llm: LlmServer
) -> None:
    application, client = app
    items = item_ids(application, 6)
    await make_active(redis, client, "u-budget", items[1:5])
    tracker = origin_of(application).llm.gateway
    assert tracker is not None
    await tracker.cost.add(tracker.cost.daily_budget_usd)
    answer = await explain(client, "u-budget", items[0])
    assert answer.json()["explanation"]["llm_generated"] is False
    assert (await llm.stats())["requests"] == 0
    assert origin_of(application).llm.counters.fallbacks["budget_exceeded"] == 1


async def test_bad_requests_are_4xx_naming_the_field(
    app: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = app
    missing = await explain(client, "u-1", "no-such-item")
    assert (missing.status_code, missing.json()["field"]) == (404, "item_id")
    style = await client.post(
        "/v1/explain",
        json={"user_id": "u-1", "item_id": "x", "context": {"explanation_style": "poetic"}},
    )
    assert (style.status_code, style.json()["field"]) == (400, "context.explanation_style")


async def test_without_a_model_server_everything_is_templates(
    redis: Redis, redis_url: str, make_settings: Callable[..., Settings]
) -> None:
    settings = await settle(make_settings, redis, redis_url=redis_url)
    application = create_app(settings)
    async with serving(application, "http://origin") as client:
        item = origin_of(application).index.items[0].item_id
        for style in ("concise", "detailed", "conversational"):
            answer = await explain(client, "u-1", item, style)
            assert answer.status_code == 200
            assert answer.json()["explanation"]["llm_generated"] is False
        assert origin_of(application).llm.gateway is None
        assert await redis.keys("llm:*") == []  # nothing spent, nothing cached


async def test_metrics_show_the_tier(
    app: tuple[FastAPI, httpx.AsyncClient], redis: Redis, llm: LlmServer
) -> None:
    application, client = app
    items = item_ids(application, 6)
    await make_active(redis, client, "u-metrics", items[1:5])
    await explain(client, "u-metrics", items[0])
    await origin_of(application).llm.flush()
    await explain(client, "u-metrics", items[0])  # the prompt cache
    await llm.control(mode="down")
    await explain(client, "u-metrics", items[1])
    text = (await client.get("/metrics")).text
    assert "perso_origin_llm_explanations_total 3.0" in text
    assert "perso_origin_llm_answers_total 2.0" in text
    assert "perso_origin_llm_wanted_total 3.0" in text
    assert 'perso_origin_llm_fallbacks_total{reason="unavailable"} 1.0' in text
    assert 'perso_origin_llm_cache_lookups_total{cache="prompt",result="hit"} 1.0' in text
    assert 'perso_origin_llm_calls_total{outcome="ok"} 1.0' in text
    assert "perso_origin_llm_enabled 1.0" in text


async def personalize(client: httpx.AsyncClient, user: str, **options: Any) -> httpx.Response:
    return await client.post(
        "/v1/personalize",
        json={
            "user_id": user,
            "context": {"page_type": "item_detail", "device": "mobile"},
            "constraints": {"count": 5},
            "options": {"include_explanation": True, **options},
        },
    )


async def test_personalize_speculates_on_the_top_item_while_ranking(
    app: tuple[FastAPI, httpx.AsyncClient], redis: Redis, llm: LlmServer
) -> None:
    application, client = app
    counters = origin_of(application).llm.counters
    items = item_ids(application, 4)
    outcomes = []
    for n in range(6):
        # A few clicks: a cold-start user (under 10 interactions) with a session to match.
        await make_active(redis, client, f"u-spec-{n}", items[:3])
        answer = await personalize(client, f"u-spec-{n}")
        assert answer.status_code == 200, answer.text
        top = answer.json()["items"][0]["explanation"]
        outcomes.append(top["llm_generated"])
    # Every request speculated (a cold-start user on a consideration page); each ended
    # one way: the model's headline on the top item, another top item, or a template.
    assert counters.speculated == 6
    ended = counters.speculation_used + counters.speculation_missed
    assert ended + counters.speculation_templates == 6
    assert outcomes.count(True) == counters.speculation_used
    assert counters.decisions["cold_start"] == 6
    assert (await llm.stats())["requests"] >= counters.speculation_used
    # Without explanations asked for, nothing is speculated.
    await client.post(
        "/v1/personalize",
        json={"user_id": "u-spec-x", "context": {"page_type": "item_detail", "device": "mobile"}},
    )
    assert counters.speculated == 6


async def test_a_hanging_model_costs_personalize_at_most_its_deadline(
    app: tuple[FastAPI, httpx.AsyncClient], llm: LlmServer
) -> None:
    _, client = app
    await llm.control(mode="hang")
    started = time.perf_counter()
    answer = await personalize(client, "u-hang")
    took_ms = (time.perf_counter() - started) * 1000
    assert answer.status_code == 200
    assert answer.json()["items"][0]["explanation"]["llm_generated"] is False
    assert took_ms < TIMEOUT_MS + 200


async def test_a_speculation_on_the_right_item_gives_the_models_headline(
    app: tuple[FastAPI, httpx.AsyncClient], redis: Redis
) -> None:
    application, client = app
    origin = origin_of(application)
    items = item_ids(application, 4)
    await make_active(redis, client, "u-right", items[:3])
    user = await read_user(origin, "u-right", None)
    index = origin.index
    mask = index.mask(Filters())
    rng = np.random.default_rng(0)
    candidates = retrieve(index, mask, 50, rng, user_vector=None, session_vector=index.vectors[1])

    def speculate() -> Speculation | None:
        return Speculation.start(
            origin.llm,
            index,
            candidates,
            now_ms=origin.now_ms(),
            state=user.state,
            preferences={},
            emotion=NEUTRAL,
            page_type=PageType.ITEM_DETAIL,
            budget_ms=TIMEOUT_MS,
        )

    speculation = speculate()
    assert speculation is not None
    headline = await speculation.headline_for(speculation.row)
    assert headline
    assert origin.llm.counters.speculation_used == 1
    # Another top item: abandoned, nothing awaited.
    other = speculate()
    assert other is not None
    assert await other.headline_for(other.row + 1) is None
    assert origin.llm.counters.speculation_missed == 1


async def test_precomputed_segment_explanations_answer_casual_users_from_the_cache(
    app: tuple[FastAPI, httpx.AsyncClient], llm: LlmServer
) -> None:
    application, client = app
    origin = origin_of(application)
    plan = llm_precompute.warm_plan(origin.index)
    assert {p.user.segment for p in plan} == {"new", "casual"}
    assert all(not p.personal for p in plan)
    written = await llm_precompute.warm_once(origin.llm, origin.index, timeout_ms=TIMEOUT_MS)
    assert written == len(plan)
    # All cached: nothing asked again.
    assert await llm_precompute.warm_once(origin.llm, origin.index, timeout_ms=TIMEOUT_MS) == 0
    asked = (await llm.stats())["requests"]
    # A casual user (one click today) asks about an item of a warmed category in which
    # they clicked: the segment explanation is already there.
    warmed = plan[len(plan) // 2].item
    same_category = [
        i.item_id
        for i in origin.index.items
        if i.category == warmed.category and i.item_id != warmed.item_id
    ]
    feedback = [{"item_id": same_category[0], "action": "click"}]
    await client.post("/v1/feedback", json={"user_id": "u-casual", "feedback": feedback})
    answer = await explain(client, "u-casual", warmed.item_id)
    assert answer.json()["explanation"]["llm_generated"] is True
    assert answer.headers[EXPLAIN_SCOPE_HEADER] == f"{SEGMENT_SCOPE}:casual"
    assert (await llm.stats())["requests"] == asked


async def test_the_elected_origin_precomputes_in_the_background(
    redis: Redis, redis_url: str, make_settings: Callable[..., Settings], llm: LlmServer
) -> None:
    settings = await settle(
        make_settings,
        redis,
        redis_url=redis_url,
        llm_base_url=llm.base_url,
        llm_precompute_every_s=60,
    )
    application = create_app(settings)
    async with serving(application, "http://origin"):
        counters = origin_of(application).llm.counters
        for _ in range(100):
            if counters.precomputed:
                break
            await asyncio.sleep(0.05)
        assert counters.precomputed > 0
        assert await redis.exists(keys.lock(llm_precompute.RESOURCE))
    # Stopped with the app: the lease is given up.
    assert not await redis.exists(keys.lock(llm_precompute.RESOURCE))


async def test_an_empty_catalog_plans_nothing_and_asks_the_model_nothing(
    redis: Redis, redis_url: str, make_settings: Callable[..., Settings], llm: LlmServer
) -> None:
    settings = make_settings(
        redis_url=redis_url,
        event_partitions=2,
        text_encoder="hashing",
        llm_timeout_ms=TIMEOUT_MS,
        llm_precompute_every_s=0,
        llm_base_url=llm.base_url,
        catalog="empty",
    )
    await start_own_catalog(settings, redis)
    application = create_app(settings)
    async with serving(application, "http://origin"):
        origin = origin_of(application)
        asked = (await llm.stats())["requests"]
        assert llm_precompute.warm_plan(origin.index) == []
        assert await llm_precompute.warm_once(origin.llm, origin.index, timeout_ms=TIMEOUT_MS) == 0
        assert (await llm.stats())["requests"] == asked
