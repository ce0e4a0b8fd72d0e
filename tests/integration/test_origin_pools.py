"""``POST /v1/internal/pools`` on the real origin over the suite's Redis: an edge's shared
fill answered with its JSON answer and the candidate pool it was ranked from (issue 18)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from config.settings import Settings
from edge.app import create_app as create_edge
from origin.app import create_app
from origin.catalog.ingest import ensure_sample_catalog
from origin.catalog.item_index import Filters
from origin.catalog.own_catalog import start_own_catalog
from origin.learned.posteriors import ALL_CONTEXTS, ItemOutcome, PosteriorStore, effective
from origin.runtime import Origin
from protocol.api import FILL_SCOPE_HEADER, SEGMENT_SCOPE, PersonalizeResponse
from protocol.audience import AUDIENCE_HEADER
from protocol.decisions import CONTEXT_HEADER, POLICY_HEADER, PROPENSITIES_HEADER
from protocol.item_vectors import ITEM_VECTORS_OF_PATH, ITEM_VECTORS_PATH, decode_item_vectors
from protocol.policies import CONFIGURED
from protocol.pools import (
    POOL_ITEMS_PATH,
    POOL_MEDIA_TYPE,
    POOLS_PATH,
    Pool,
    decode_pool,
    decode_pool_fill,
    encode_pool,
)
from protocol.segments import Segment
from tests.apps import serving
from tests.credentials import bearer, user_token
from tests.fakes import FakeClock
from tests.integration.test_origin_api import set_user_model

POOL_SIZE = 40
SHARED = {FILL_SCOPE_HEADER: SEGMENT_SCOPE}
NOW = 1_767_294_000.0


def body(user_id: str = "u-1", **parts: Any) -> dict[str, Any]:
    return {"user_id": user_id, "context": {"page_type": "home", "device": "mobile"}, **parts}


@pytest.fixture
async def settings(
    redis: Redis, redis_url: str, make_settings: Callable[..., Settings]
) -> Settings:
    made = make_settings(redis_url=redis_url, event_partitions=4, pool_size=POOL_SIZE)
    await ensure_sample_catalog(made, redis)
    return made


@pytest.fixture
async def app(settings: Settings) -> FastAPI:
    return create_app(settings, clock=FakeClock(NOW))


@pytest.fixture
async def origin(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(app, "http://origin") as client:
        yield client


def runtime(app: FastAPI) -> Origin:
    found: Origin = app.state.origin
    return found


async def pool_fill(
    client: httpx.AsyncClient, user_id: str = "u-1", **parts: Any
) -> tuple[httpx.Response, PersonalizeResponse, Pool]:
    response = await client.post(POOLS_PATH, json=body(user_id, **parts), headers=SHARED)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == POOL_MEDIA_TYPE
    answer, pool = decode_pool_fill(response.content)
    return response, PersonalizeResponse.model_validate_json(answer), pool


async def test_a_pool_fill_holds_its_answer_and_the_candidates_it_was_ranked_from(
    app: FastAPI, origin: httpx.AsyncClient
) -> None:
    response, answer, pool = await pool_fill(origin)
    index = runtime(app).index
    assert len(answer.items) == 20
    assert len(pool) == POOL_SIZE  # 500 retrieved, the best 40 kept
    assert {i.item_id for i in answer.items} <= set(pool.item_ids)
    assert len(set(pool.item_ids)) == len(pool)
    rows = [index.row_of[i] for i in pool.item_ids]
    np.testing.assert_allclose(pool.vectors, index.vectors[rows], atol=1e-3)
    assert pool.categories == tuple(index.items[r].category for r in rows)
    assert (pool.context, pool.model_version, pool.built_ms) == (
        response.headers[CONTEXT_HEADER],
        "nn-slice-1",
        int(NOW * 1000),
    )
    shown = {i.item_id: i for i in answer.items}
    for item_id, metadata in zip(pool.item_ids, pool.metadata, strict=True):
        if item_id in shown:
            assert shown[item_id].metadata.model_dump_json().encode() == metadata
    # the headers of a shared fill of /v1/personalize
    assert response.headers[AUDIENCE_HEADER] == "segment"
    assert response.headers[POLICY_HEADER] == f"{CONFIGURED}/1"
    assert len(response.headers[PROPENSITIES_HEADER].split(",")) == 20
    assert answer.metadata.degraded is False


async def test_the_pools_posteriors_are_those_the_ranking_read(
    app: FastAPI, origin: httpx.AsyncClient, redis: Redis
) -> None:
    first, _, _ = await pool_fill(origin)
    cell = first.headers[CONTEXT_HEADER]
    origin_runtime = runtime(app)
    index = origin_runtime.index
    store = PosteriorStore(redis, origin_runtime.posteriors.config)
    # Cold priors come from the observed candidates of each category: learn about items
    # every fill retrieves (the most popular ones, the trending share), some of it graded.
    popular = index.item_ids[index.popular(15, index.mask(Filters()))]
    outcomes = [
        ItemOutcome(str(item_id), 2.0 + k % 3, 10.0 + k, grades=(2.0 + k % 3) * (1 + k % 2))
        for k, item_id in enumerate(popular)
    ]
    async with redis.pipeline(transaction=False) as pipe:
        await store.queue_add(pipe, [cell, ALL_CONTEXTS], "m-pools", outcomes, int(NOW * 1000))
        await pipe.execute()
    _, _, pool = await pool_fill(origin)
    # Every observed item is a candidate, so reading them all gives the same cold priors.
    stored = await store.read(cell, index.item_ids)
    config = store.config
    every_alpha, every_beta = effective(
        stored.cell, stored.everywhere, index.category, NOW * 1000, config
    )
    rows = [index.row_of[i] for i in pool.item_ids]
    alpha, beta = every_alpha[rows], every_beta[rows]
    values = stored.values.relative(NOW * 1000, config)[rows]
    assert np.array_equal(pool.alpha, alpha.astype(np.float32))
    assert np.array_equal(pool.beta, beta.astype(np.float32))
    assert np.array_equal(pool.value, values.astype(np.float32))
    assert (pool.value != 1.0).any()  # the graded items are worth more than a click


async def test_two_users_pool_fills_are_built_from_nothing_of_either(
    settings: Settings, redis: Redis
) -> None:
    await set_user_model(redis, "u-avid", np.ones(32))
    pools: list[bytes] = []
    answers: list[list[tuple[str, float, str]]] = []
    for user_id in ("u-avid", "u-new"):
        app = create_app(settings, clock=FakeClock(NOW), rng=np.random.default_rng(18))
        async with serving(app, "http://origin") as client:
            if user_id == "u-avid":
                # their history and stated preferences, which a shared fill must not read
                clicked = {"item_id": "it-000003", "action": "click"}
                sent = await client.post(
                    "/v1/feedback", json={"user_id": user_id, "feedback": [clicked]}
                )
                assert sent.status_code == 200, sent.text
                stated = {
                    "user_id": user_id,
                    "category": "books",
                    "direction": "negative",
                    "strength": 1.0,
                }
                assert (await client.post("/v1/preferences", json=stated)).status_code == 200
            _, answer, pool = await pool_fill(client, user_id)
        pools.append(encode_pool(pool))
        answers.append([(i.item_id, i.score, i.source) for i in answer.items])
    assert pools[0] == pools[1]
    assert answers[0] == answers[1]


@pytest.mark.parametrize(
    "headers",
    [{}, {FILL_SCOPE_HEADER: "user"}, {FILL_SCOPE_HEADER: ""}, {FILL_SCOPE_HEADER: "Segment"}],
)
async def test_a_pool_for_anyone_but_the_segment_is_a_400_naming_the_header(
    origin: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    response = await origin.post(POOLS_PATH, json=body(), headers=headers)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == FILL_SCOPE_HEADER


@pytest.mark.parametrize(
    ("parts", "field"),
    [
        ({"constraints": {"count": 0}}, "constraints.count"),
        ({"options": {"exploration_rate": 2}}, "options.exploration_rate"),
        ({"context": {"page_type": "nowhere", "device": "mobile"}}, "context.page_type"),
        ({"surprise": 1}, "surprise"),
    ],
)
async def test_a_bad_body_is_a_400_naming_the_field(
    origin: httpx.AsyncClient, parts: dict[str, Any], field: str
) -> None:
    response = await origin.post(POOLS_PATH, json=body(**parts), headers=SHARED)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field


async def test_unreadable_posteriors_give_a_degraded_answer_and_the_priors(
    app: FastAPI, origin: httpx.AsyncClient
) -> None:
    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(-1)  # reads every command, answers none
        writer.close()

    silent = await asyncio.start_server(swallow, "127.0.0.1", 0)
    stalled = Redis(host="127.0.0.1", port=silent.sockets[0].getsockname()[1])
    try:
        origin_runtime = runtime(app)
        origin_runtime.posteriors = PosteriorStore(stalled, origin_runtime.posteriors.config)
        _, answer, pool = await pool_fill(origin)
    finally:
        await stalled.aclose()
        silent.close()
    assert answer.metadata.degraded is True
    assert len(answer.items) == 20
    assert {i.item_id for i in answer.items} <= set(pool.item_ids)
    index = origin_runtime.index
    rows = [index.row_of[i] for i in pool.item_ids]
    prior = origin_runtime.posteriors.prior(len(pool))
    config = origin_runtime.posteriors.config
    alpha, beta = effective(prior.cell, prior.everywhere, index.category[rows], NOW * 1000, config)
    assert np.array_equal(pool.alpha, alpha.astype(np.float32))
    assert np.array_equal(pool.beta, beta.astype(np.float32))


async def test_an_empty_catalog_gives_an_empty_pool_and_answer(
    redis: Redis, redis_url: str, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(
        redis_url=redis_url, event_partitions=2, text_encoder="hashing", catalog="empty"
    )
    await start_own_catalog(settings, redis)
    async with serving(create_app(settings), "http://origin") as client:
        _, answer, pool = await pool_fill(client)
    assert answer.items == []
    assert len(pool) == 0
    assert pool.dim == settings.embedding_dim


async def test_an_edge_ranks_a_power_user_from_the_origins_pool(
    settings: Settings, redis: Redis
) -> None:
    """The edge's side of the route (``edge.serve.pool_answer``) against it: a power user with a
    model is answered at the edge from the pool the origin filled, once."""
    await set_user_model(redis, "u-power", np.ones(32))
    clock = FakeClock(NOW)
    settings = settings.model_copy(update={"edge_ranking": True})
    origin_app = create_app(settings, clock=clock, rng=np.random.default_rng(3))
    asked: list[str] = []

    class Recording(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx.ASGITransport(app=origin_app)

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            asked.append(request.url.path)
            return await self.inner.handle_async_request(request)

    edge_app = create_edge(settings, region="us-east", clock=clock, origin_transport=Recording())
    token = bearer(user_token("u-power", now_s=NOW, segment=Segment.POWER))
    async with (
        serving(origin_app, "http://origin"),
        serving(edge_app, "http://edge") as edge,
    ):
        started = len(asked)  # the popular list, fetched at start-up
        answers = []
        for _ in range(2):
            response = await edge.post("/v1/personalize", json=body("u-power"), headers=token)
            assert response.status_code == 200, response.text
            answers.append(PersonalizeResponse.model_validate_json(response.content))
    assert [a.metadata.tier for a in answers] == ["edge", "edge"]
    assert all(len(a.items) == 20 for a in answers)
    # the user's state and the segment's pool, once; no ranking asked of the origin (the
    # catalog's vectors and the user's own candidates are read in the background)
    background = (ITEM_VECTORS_PATH, POOL_ITEMS_PATH)
    on_the_path = [path for path in asked[started:] if path not in background]
    assert on_the_path == ["/v1/internal/users/u-power/state", POOLS_PATH]


async def test_pool_items_are_the_asked_items_the_constraints_allow_in_the_pools_cell(
    app: FastAPI, origin: httpx.AsyncClient
) -> None:
    """``POST /v1/internal/pools/items``: a user's own candidates as rows of a pool an edge
    holds, with the posteriors and values a fill of that cell would carry."""
    _, _, filled = await pool_fill(origin)
    index = runtime(app).index
    outside = [str(i) for i in index.item_ids if i not in set(filled.item_ids)][:30]
    category = index.items[index.row_of[outside[0]]].category
    asked = {
        "cell": filled.context,
        "constraints": {"categories": [category]},
        "item_ids": [*outside, "not-in-the-catalog"],
    }
    response = await origin.post(POOL_ITEMS_PATH, json=asked)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == POOL_MEDIA_TYPE
    rows = decode_pool(response.content)
    allowed = {
        i
        for i in outside
        if index.items[index.row_of[i]].category == category
        and bool(index.in_stock[index.row_of[i]])
    }
    assert set(rows.item_ids) == allowed
    assert outside[0] in allowed
    assert rows.context == filled.context
    assert set(rows.sources) == {"collaborative"}
    assert rows.stored is not None
    # the same effective posteriors a pool of that cell holds for a shared item
    shared = filled.item_ids[0]
    again = await origin.post(POOL_ITEMS_PATH, json={"cell": filled.context, "item_ids": [shared]})
    [alpha] = decode_pool(again.content).alpha
    assert alpha == pytest.approx(filled.alpha[0], rel=1e-5)


@pytest.mark.parametrize(
    ("asked", "field"),
    [
        ({"cell": "Mobile Evening", "item_ids": ["it-1"]}, "cell"),
        ({"cell": "mobile_evening", "item_ids": []}, "item_ids"),
        ({"cell": "mobile_evening", "item_ids": ["it-1"], "user_id": "u"}, "user_id"),
    ],
)
async def test_bad_pool_items_requests_are_refused_naming_the_field(
    origin: httpx.AsyncClient, asked: dict[str, Any], field: str
) -> None:
    response = await origin.post(POOL_ITEMS_PATH, json=asked)
    assert response.status_code == 400
    assert field in response.text


async def test_item_vectors_come_by_page_or_by_id(app: FastAPI, origin: httpx.AsyncClient) -> None:
    index = runtime(app).index
    first = await origin.post(ITEM_VECTORS_PATH, json={"offset": 0, "limit": 300})
    rest = await origin.post(ITEM_VECTORS_PATH, json={"offset": 300, "limit": 300})
    pages = [decode_item_vectors(r.content) for r in (first, rest)]
    assert [len(p) for p in pages] == [300, len(index) - 300]
    assert pages[0].total == len(index)
    ids = [i for p in pages for i in p.item_ids]
    assert ids == [str(i) for i in index.item_ids]
    codes = np.concatenate([p.codes for p in pages]).astype(np.float32)
    scales = np.concatenate([p.scales for p in pages])
    np.testing.assert_allclose(codes * scales[:, None], index.vectors, atol=0.01)
    by_id = decode_item_vectors(
        (await origin.post(ITEM_VECTORS_OF_PATH, json={"item_ids": [ids[7], "gone-1"]})).content
    )
    assert (by_id.item_ids, by_id.absent) == ((ids[7],), ("gone-1",))
