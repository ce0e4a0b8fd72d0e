"""``POST /v1/explain`` through the edge app, in front of the real origin app (in-process,
over the suite's Redis; templates, no model server): segment explanations cached at the
edge, personal ones forwarded every time, the edge's 401/403/400/429/503."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from config.settings import Settings
from edge.app import create_app as create_edge
from edge.node import Edge
from origin.app import create_app as create_origin
from origin.catalog.ingest import ensure_sample_catalog
from origin.runtime import Origin
from protocol.api import (
    EXPLAIN_SCOPE_HEADER,
    FILL_SCOPE_HEADER,
    SEGMENT_HEADER,
    SEGMENT_SCOPE,
    ExplainResponse,
)
from protocol.segments import Segment
from tests.apps import serving
from tests.credentials import bearer, user_token
from tests.fakes import FakeClock

HOUR_S = 3600


class Network(httpx.AsyncBaseTransport):
    """The network between edge and origin: a test can cut it, count the explain requests
    it carries, and change the scope the origin's explain answers declare."""

    def __init__(self, app: FastAPI) -> None:
        self._inner = httpx.ASGITransport(app=app)
        self.down = False
        self.explains: list[httpx.Headers] = []
        self.scope: str | None = None  # replaces the origin's EXPLAIN_SCOPE_HEADER; "": drops it

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("origin unreachable", request=request)
        response = await self._inner.handle_async_request(request)
        if request.url.path == "/v1/explain":
            self.explains.append(request.headers)
            if self.scope is not None:
                await response.aread()
                headers = {k: v for k, v in response.headers.items() if k != EXPLAIN_SCOPE_HEADER}
                if self.scope:
                    headers[EXPLAIN_SCOPE_HEADER] = self.scope
                return httpx.Response(
                    response.status_code, headers=headers, content=response.content
                )
        return response


class Setup:
    def __init__(
        self,
        client: httpx.AsyncClient,
        network: Network,
        clock: FakeClock,
        edge: Edge,
        items: list[str],
    ) -> None:
        self.client = client
        self.network = network
        self.clock = clock
        self.edge = edge
        self.items = items

    def auth(self, user_id: str, **claims: Any) -> dict[str, str]:
        return bearer(user_token(user_id, now_s=self.clock(), **claims))

    async def explain(
        self,
        user_id: str,
        item: int = 0,
        *,
        style: str = "concise",
        segment: Segment = Segment.NEW,
        tier: str = "premium",
    ) -> httpx.Response:
        payload = {
            "user_id": user_id,
            "item_id": self.items[item],
            "context": {"page_type": "item_detail", "explanation_style": style},
        }
        return await self.client.post(
            "/v1/explain", json=payload, headers=self.auth(user_id, segment=segment, tier=tier)
        )


@pytest.fixture
async def setup(
    redis: Redis, redis_url: str, make_settings: Callable[..., Settings]
) -> AsyncIterator[Setup]:
    settings = make_settings(
        redis_url=redis_url, event_partitions=2, text_encoder="hashing", catalog_size=200
    )
    await ensure_sample_catalog(settings, redis)
    clock = FakeClock()
    origin_app = create_origin(settings)
    network = Network(origin_app)
    edge_app = create_edge(settings, region="us-east", clock=clock, origin_transport=network)
    async with (
        serving(origin_app, "http://origin"),
        serving(edge_app, "http://edge") as client,
    ):
        origin: Origin = origin_app.state.origin
        items = [item.item_id for item in origin.index.items[:3]]
        yield Setup(client, network, clock, edge_app.state.edge, items)


def explanation_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    answer = ExplainResponse.model_validate_json(response.content)
    return answer.explanation.model_dump()


async def test_a_new_users_explanation_is_cached_for_the_segment(setup: Setup) -> None:
    first = await setup.explain("new-1")
    assert first.headers["x-cache"] == "MISS"
    assert first.json()["item_id"] == setup.items[0]
    assert first.json()["latency_ms"] >= 0
    assert EXPLAIN_SCOPE_HEADER not in first.headers  # edge-to-origin only
    (asked,) = setup.network.explains
    assert (asked[FILL_SCOPE_HEADER], asked[SEGMENT_HEADER]) == (SEGMENT_SCOPE, "new")
    # another new user, same item, style and page: the edge answers
    second = await setup.explain("new-2")
    assert second.headers["x-cache"] == "HIT"
    assert explanation_of(second) == explanation_of(first)
    assert second.headers["cache-control"].startswith("private, max-age=")
    assert len(setup.network.explains) == 1
    # another style, another item, another segment: their own entries
    assert (await setup.explain("new-1", style="detailed")).headers["x-cache"] == "MISS"
    assert (await setup.explain("new-1", item=1)).headers["x-cache"] == "MISS"
    casual = await setup.explain("casual-1", segment=Segment.CASUAL)
    assert casual.headers["x-cache"] == "MISS"
    assert setup.network.explains[-1][SEGMENT_HEADER] == "casual"
    assert len(setup.network.explains) == 4
    assert len(setup.edge.explanations) == 4


async def test_the_entry_lives_for_the_llm_cache_ttl(setup: Setup) -> None:
    await setup.explain("new-1")
    setup.clock.tick(HOUR_S - 1)
    assert (await setup.explain("new-1")).headers["x-cache"] == "HIT"
    setup.clock.tick(2)
    assert (await setup.explain("new-1")).headers["x-cache"] == "MISS"
    assert len(setup.network.explains) == 2


async def test_an_active_or_power_users_explanation_is_never_cached(setup: Setup) -> None:
    for segment in (Segment.ACTIVE, Segment.POWER, Segment.ACTIVE, Segment.POWER):
        answer = await setup.explain(f"busy-{segment}", segment=segment)
        assert answer.headers["x-cache"] == "MISS"
        assert answer.headers["cache-control"] == "private, max-age=0"
    assert len(setup.network.explains) == 4
    assert all(FILL_SCOPE_HEADER not in h for h in setup.network.explains)
    assert len(setup.edge.explanations) == 0
    assert setup.edge.explain_counters.forwarded == 4


async def test_the_edges_own_view_of_a_user_decides(setup: Setup) -> None:
    """A user whose token says new but whose feedback the edge saw makes them active."""
    feedback = [{"item_id": i, "action": "click"} for i in setup.items]
    sent = await setup.client.post(
        "/v1/feedback", json={"user_id": "grew", "feedback": feedback}, headers=setup.auth("grew")
    )
    assert sent.status_code == 200, sent.text
    await setup.explain("grew")
    await setup.explain("grew")
    assert len(setup.network.explains) == 2
    assert len(setup.edge.explanations) == 0


async def test_only_an_answer_made_for_the_segment_is_kept(setup: Setup) -> None:
    for scope in ("", "segment:casual", "segment", "personal"):
        setup.network.scope = scope  # "": the origin declared no scope
        await setup.explain("new-1")
        assert (await setup.explain("new-2")).headers["x-cache"] == "MISS"
        assert len(setup.edge.explanations) == 0
    setup.network.scope = None
    await setup.explain("new-1")
    assert (await setup.explain("new-2")).headers["x-cache"] == "HIT"


async def test_concurrent_misses_of_one_key_make_one_origin_call(setup: Setup) -> None:
    answers = await asyncio.gather(*(setup.explain(f"c-{n}") for n in range(20)))
    assert len({str(explanation_of(a)) for a in answers}) == 1
    assert len(setup.network.explains) == 1
    assert setup.edge.explain_coalescer.followers >= 1


async def test_refusals_name_what_is_wrong(setup: Setup) -> None:
    def payload(user: str = "u-1", **fields: Any) -> dict[str, Any]:
        return {"user_id": user, "item_id": setup.items[0], **fields}

    forged = bearer(user_token("u-1", now_s=setup.clock(), key="another-key-0123456789"))
    for body, headers, status, field, reason in (
        (payload("bob"), setup.auth("alice"), 403, "user_id", "not the user"),
        (payload(), {}, 401, "authorization", "missing bearer token"),
        (payload(), forged, 401, "authorization", "bad signature"),
        ({"user_id": "u-1"}, setup.auth("u-1"), 400, "item_id", "required"),
        (
            payload(context={"explanation_style": "poetic"}),
            setup.auth("u-1"),
            400,
            "context.explanation_style",
            "concise",
        ),
        (payload(extra=1), setup.auth("u-1"), 400, "extra", "not permitted"),
        (payload(item_id="has space"), setup.auth("u-1"), 400, "item_id", "pattern"),
        (payload(item_id="no-such-item"), setup.auth("u-1"), 404, "item_id", "no-such-item"),
    ):
        response = await setup.client.post("/v1/explain", json=body, headers=headers)
        problem = response.json()
        assert (response.status_code, problem["field"]) == (status, field), problem
        assert reason in problem["reason"], problem
    # only the unknown item reached the origin (it alone knows the catalog)
    assert len(setup.network.explains) == 1


async def test_over_the_free_tiers_limit_a_cached_answer_else_429(setup: Setup) -> None:
    # seed 001: free tier, one explain request per second per user
    assert (await setup.explain("free-1", tier="free")).status_code == 200
    cached = await setup.explain("free-1", tier="free")
    assert (cached.status_code, cached.headers["x-cache"]) == (200, "HIT")
    refused = await setup.explain("free-2", segment=Segment.ACTIVE, tier="free")
    assert refused.status_code == 200
    refused = await setup.explain("free-2", segment=Segment.ACTIVE, tier="free")
    assert refused.status_code == 429
    assert refused.json()["error"] == "rate_limited"
    assert refused.headers["retry-after"] == "1"
    setup.clock.tick(1)
    assert (await setup.explain("free-2", segment=Segment.ACTIVE, tier="free")).status_code == 200
    assert setup.edge.explain_counters.rate_limited == 2


async def test_with_the_origin_down_an_expired_answer_else_503(setup: Setup) -> None:
    kept = explanation_of(await setup.explain("new-1"))
    setup.clock.tick(HOUR_S + 60)  # expired, still within stale-if-error
    setup.network.down = True
    stale = await setup.explain("new-2")
    assert stale.headers["x-cache"] == "STALE"
    assert stale.headers["cache-control"] == "no-store"
    assert explanation_of(stale) == kept
    for refused in (
        await setup.explain("new-2", item=2),
        await setup.explain("busy", segment=Segment.ACTIVE),
    ):
        assert refused.status_code == 503
        assert refused.json()["error"] == "origin_unavailable"
        assert int(refused.headers["retry-after"]) >= 1


async def test_metrics_count_explain_answers_by_how_they_were_served(setup: Setup) -> None:
    await setup.explain("m-1")
    await setup.explain("m-2")
    await setup.explain("m-3")
    await setup.explain("m-4", segment=Segment.POWER)
    text = (await setup.client.get("/metrics")).text
    for served, value in (("hit", 2), ("miss", 1), ("stale", 0), ("forwarded", 1)):
        line = f'perso_edge_explain_answers_total{{region="us-east",served="{served}"}} {value}.0'
        assert line in text
    assert 'perso_edge_explain_cache_entries{region="us-east"} 1.0' in text
