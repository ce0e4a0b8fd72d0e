"""The edge app in front of the real origin app (in-process, over the suite's Redis)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from config.settings import Settings
from edge.app import create_app as create_edge
from edge.http.asgi import EdgeFront
from edge.node import Edge
from origin.app import create_app as create_origin
from origin.learned.user_models import UserRecord, decode_record, encode_record
from origin.worker.consumer import StreamWorker
from origin.worker.edge_updates import EdgeUpdates
from protocol import keys
from protocol.api import PersonalizeResponse
from relevance.user_model import UserModel, model_bytes
from sync.messages import ModelEpoch, PurgeTag, UserUpdate
from sync.publisher import SyncPublisher
from tests.apps import serving
from tests.credentials import bearer, user_token
from tests.fakes import FakeClock


class Switchable(httpx.AsyncBaseTransport):
    """The network between edge and origin, which a test can cut."""

    def __init__(self, app: FastAPI) -> None:
        self._inner = httpx.ASGITransport(app=app)
        self.down = False
        self.calls = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("origin unreachable", request=request)
        self.calls += 1
        return await self._inner.handle_async_request(request)


class EdgeUnderTest:
    def __init__(self, client: httpx.AsyncClient, network: Switchable, clock: FakeClock) -> None:
        self.client = client
        self.network = network
        self.clock = clock

    def auth(self, user_id: str, **claims: Any) -> dict[str, str]:
        return bearer(user_token(user_id, now_s=self.clock(), **claims))

    async def post(self, path: str, user_id: str, payload: Any, **headers: str) -> httpx.Response:
        return await self.client.post(path, json=payload, headers={**self.auth(user_id), **headers})

    async def personalize(self, user_id: str = "u-1", **parts: Any) -> PersonalizeResponse:
        response = await self.post("/v1/personalize", user_id, body(user_id, **parts))
        assert response.status_code == 200, response.text
        return PersonalizeResponse.model_validate_json(response.content)

    async def feedback(self, user_id: str, *item_ids: str) -> httpx.Response:
        items = [{"item_id": i, "action": "click"} for i in item_ids]
        return await self.post("/v1/feedback", user_id, {"user_id": user_id, "feedback": items})


async def set_user_model(redis: Redis, user_id: str, mean: Any) -> None:
    """Store a user whose model the worker learnt: ``mean``, certain."""
    vector = np.asarray(mean, dtype=np.float32)
    model = UserModel(vector, np.full(vector.shape, 1e-3, dtype=np.float32))
    record = UserRecord(version=1, model=model)
    await redis.set(keys.user_record(user_id), encode_record(record, vector.shape[0]))


def body(user_id: str, **parts: Any) -> dict[str, Any]:
    context = {"page_type": "home", "device": "mobile", "geo": {"country": "US", "region": "NY"}}
    return {"user_id": user_id, "context": context, **parts}


@pytest.fixture
async def edge(origin_settings: Settings) -> AsyncIterator[EdgeUnderTest]:
    """An edge on its cache path: PERSO_EDGE_RANKING off, the origin ranks every answer and
    the edge caches, shares, refreshes and falls back on them (what an edge that ranks
    itself does is tests/integration/test_edge_ranking.py's)."""
    settings = origin_settings.model_copy(update={"edge_ranking": False})
    clock = FakeClock()
    # a seeded bandit: which items are exploration is then the same on every run
    origin_app = create_origin(settings, rng=np.random.default_rng(7))
    network = Switchable(origin_app)
    edge_app = create_edge(settings, region="us-east", clock=clock, origin_transport=network)
    async with (
        serving(origin_app, "http://origin"),
        serving(edge_app, "http://edge") as client,
    ):
        yield EdgeUnderTest(client, network, clock)


async def test_a_miss_goes_to_the_origin_then_the_same_key_hits(edge: EdgeUnderTest) -> None:
    calls = edge.network.calls  # the popular list, fetched at start-up
    first = await edge.personalize()
    assert (first.metadata.tier, first.metadata.cache_hit) == ("origin", False)
    assert first.metadata.ranked_by == "origin"
    second = await edge.personalize()
    # served by the edge's cache, ranked by the origin: the tier says who ranked
    assert (second.metadata.tier, second.metadata.cache_hit) == ("origin", True)
    assert second.metadata.ranked_by == "origin"
    assert [i.item_id for i in second.items] == [i.item_id for i in first.items]
    assert second.request_id != first.request_id
    assert edge.network.calls == calls + 1


async def test_every_answer_says_who_ranked_it(edge: EdgeUnderTest) -> None:
    """``metadata.ranked_by`` is in the body itself (not the model's default): the origin on
    a miss, and on the hit of the origin's ranking that the edge's cache serves after it."""
    seen = []
    for _ in range(2):
        response = await edge.post("/v1/personalize", "u-9", body("u-9"))
        assert response.status_code == 200, response.text
        meta = response.json()["metadata"]
        seen.append((response.headers["x-cache"], meta["tier"], meta["ranked_by"]))
    assert seen == [("MISS", "origin", "origin"), ("HIT", "origin", "origin")]


async def test_users_of_one_segment_share_the_entry_but_not_their_own_fields(
    edge: EdgeUnderTest,
) -> None:
    alice = await edge.personalize("alice")
    top = alice.items[0].item_id
    bob = await edge.personalize("bob", constraints={"count": 5, "exclude_items": [top]})
    assert bob.metadata.cache_hit
    assert bob.user_id == "bob"
    assert alice.user_id == "alice"
    assert [i.item_id for i in bob.items] == [i.item_id for i in alice.items[1:6]]
    assert [i.rank for i in bob.items] == [1, 2, 3, 4, 5]
    assert bob.request_id != alice.request_id
    # and alice's answer, served again, still has her top item: bob's exclusion was his only
    again = await edge.personalize("alice")
    assert again.items[0].item_id == top


async def test_explanations_are_served_only_when_asked(edge: EdgeUnderTest) -> None:
    plain = await edge.personalize()
    assert all(i.explanation is None for i in plain.items)
    explained = await edge.personalize(options={"include_explanation": True})
    assert explained.metadata.cache_hit
    assert all(i.explanation is not None for i in explained.items)
    assert "u-1" not in explained.model_dump_json(include={"items"})


async def test_filters_have_their_own_entries(edge: EdgeUnderTest) -> None:
    await edge.personalize()
    books = await edge.personalize(constraints={"categories": ["books"]})
    assert not books.metadata.cache_hit
    assert {i.metadata.category for i in books.items} == {"Books"}


async def test_too_many_exclusions_refill_from_the_origin(edge: EdgeUnderTest) -> None:
    first = await edge.personalize(constraints={"count": 20})
    excluded = [i.item_id for i in first.items] + ["x"] * 40
    refill = await edge.personalize(constraints={"count": 20, "exclude_items": excluded[:45]})
    assert len(refill.items) == 20
    assert not {i.item_id for i in refill.items} & set(excluded)


async def test_more_exclusions_than_a_fill_holds_are_answered_by_the_origin(
    edge: EdgeUnderTest,
) -> None:
    top = await edge.personalize(constraints={"count": 100})
    excluded = [i.item_id for i in top.items[:90]]
    answer = await edge.personalize(constraints={"count": 20, "exclude_items": excluded})
    assert not answer.metadata.cache_hit
    assert len(answer.items) == 20
    assert not {i.item_id for i in answer.items} & set(excluded)
    assert [i.rank for i in answer.items] == list(range(1, 21))
    # that personal answer was not stored: the shared entry still serves everyone
    assert (await edge.personalize(constraints={"count": 100})).metadata.cache_hit


async def test_entries_expire_with_their_ttl(edge: EdgeUnderTest) -> None:
    await edge.personalize()
    edge.clock.tick(899)  # casual/new: 900 s, and still the same 15-minute bucket
    assert (await edge.personalize()).metadata.cache_hit
    edge.clock.tick(1)
    assert not (await edge.personalize()).metadata.cache_hit


async def test_feedback_reaches_the_stream_and_moves_a_power_user_to_fresh_keys(
    edge: EdgeUnderTest, redis: Redis, origin_settings: Settings
) -> None:
    await set_user_model(redis, "pat", np.ones(32))
    coarse = await edge.personalize("pat")
    # a new user's entry is filled for the segment, not from pat's own embedding
    assert {i.source for i in coarse.items} <= {"trending", "exploration"}
    accepted = await edge.feedback("pat", *(f"it-{n:06d}" for n in range(11)))
    assert accepted.status_code == 200
    assert accepted.json()["processed"] == 11
    stream = keys.events_stream(keys.partition_of("pat", origin_settings.event_partitions))
    assert await redis.xlen(stream) == 11
    power = await edge.personalize("pat")
    assert not power.metadata.cache_hit  # keyed by pat's recent interactions now
    # and filled from pat's own embedding and session
    assert {"collaborative", "content"} & {i.source for i in power.items}
    # filled right after the clicks, that entry lives only until they have settled into
    # pat's embedding; then the next request fills again
    edge.clock.tick(1.9)
    assert (await edge.personalize("pat")).metadata.cache_hit
    edge.clock.tick(0.1)
    assert not (await edge.personalize("pat")).metadata.cache_hit
    assert (await edge.personalize("pat")).metadata.cache_hit  # settled: a normal TTL now


async def test_malformed_requests_are_400s_at_the_edge(edge: EdgeUnderTest) -> None:
    calls = edge.network.calls
    response = await edge.post("/v1/personalize", "u", body("u", constraints={"count": 0}))
    assert response.status_code == 400
    assert response.json()["field"] == "constraints.count"
    response = await edge.post("/v1/feedback", "u", {"user_id": "u", "feedback": []})
    assert response.status_code == 400
    assert response.json()["field"] == "feedback"
    response = await edge.client.post(
        "/v1/personalize", content=b"{not json", headers=edge.auth("u")
    )
    assert response.status_code == 400
    assert response.json()["field"] == "body"
    assert edge.network.calls == calls


async def test_with_the_origin_down_hits_are_served_and_misses_get_the_popular_list(
    edge: EdgeUnderTest,
) -> None:
    await edge.personalize()
    edge.network.down = True
    assert (await edge.personalize()).metadata.cache_hit
    miss = await edge.post(
        "/v1/personalize",
        "u",
        body("u", constraints={"count": 3}, context={"page_type": "search", "device": "tv"}),
    )
    assert miss.status_code == 200
    assert miss.headers["x-cache"] == "STALE"
    assert miss.headers["cache-control"] == "no-store"
    answer = PersonalizeResponse.model_validate_json(miss.content)
    assert answer.metadata.degraded
    assert len(answer.items) == 3
    assert answer.user_id == "u"
    # feedback is held on the edge's disk, handed on when the origin is back
    held = await edge.feedback("u-1", "it-000001")
    assert (held.status_code, held.json()["status"]) == (202, "held")
    # Issue 15 item 4: an edge serving from its cache is ready; the origin's state is in
    # /dependencies and /metrics, not in readiness.
    assert (await edge.client.get("/readyz")).status_code == 200
    assert (await edge.client.get("/healthz")).status_code == 200
    found = (await edge.client.get("/dependencies")).json()
    assert found["region"] == "us-east"
    assert found["dependencies"]["origin"]["up"] is False
    assert found["dependencies"]["store"]["up"] is True
    metrics = (await edge.client.get("/metrics")).text
    assert 'perso_edge_dependency_up{dependency="origin",region="us-east"} 0.0' in metrics
    edge.network.down = False
    assert (await edge.client.get("/readyz")).status_code == 200
    found = (await edge.client.get("/dependencies")).json()
    assert found["dependencies"]["origin"]["up"] is True


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "missing bearer token"),
        ({"authorization": "Bearer v1.forged.sig"}, "invalid token"),
        ({"authorization": "Basic dTpw"}, "missing bearer token"),
    ],
)
async def test_callers_without_a_genuine_token_get_401(
    edge: EdgeUnderTest, headers: dict[str, str], reason: str
) -> None:
    for path, payload in (
        ("/v1/personalize", body("u-1")),
        ("/v1/feedback", {"user_id": "u-1", "feedback": [{"item_id": "i", "action": "click"}]}),
    ):
        response = await edge.client.post(path, json=payload, headers=headers)
        assert response.status_code == 401, response.text
        assert response.json()["field"] == "authorization"
        assert reason in response.json()["reason"]


async def test_forged_and_expired_tokens_get_401(edge: EdgeUnderTest) -> None:
    forged = bearer(user_token("u-1", now_s=edge.clock(), key="another-key-0123456789"))
    response = await edge.client.post("/v1/personalize", json=body("u-1"), headers=forged)
    assert (response.status_code, response.json()["reason"]) == (
        401,
        "invalid token: bad signature",
    )
    expired = bearer(user_token("u-1", now_s=edge.clock() - 7200))
    response = await edge.client.post("/v1/personalize", json=body("u-1"), headers=expired)
    assert (response.status_code, response.json()["reason"]) == (
        401,
        "invalid token: token expired",
    )


async def test_a_user_cannot_act_as_another(edge: EdgeUnderTest) -> None:
    as_alice = edge.auth("alice")
    read = await edge.client.post("/v1/personalize", json=body("bob"), headers=as_alice)
    assert (read.status_code, read.json()["field"]) == (403, "user_id")
    write = await edge.client.post(
        "/v1/feedback",
        json={"user_id": "bob", "feedback": [{"item_id": "it-000001", "action": "purchase"}]},
        headers=as_alice,
    )
    assert (write.status_code, write.json()["field"]) == (403, "user_id")


async def test_cdn_headers_and_conditional_requests(edge: EdgeUnderTest) -> None:
    first = await edge.post("/v1/personalize", "u-1", body("u-1"))
    assert first.headers["x-cache"] == "MISS"
    assert first.headers["vary"] == "Authorization"
    assert first.headers["cache-control"] == "private, max-age=900"
    assert first.headers["age"] == "0"
    edge.clock.tick(30)
    second = await edge.post("/v1/personalize", "u-1", body("u-1"))
    assert (second.headers["x-cache"], second.headers["age"]) == ("HIT", "30")
    assert second.headers["cache-control"] == "private, max-age=870"
    assert second.headers["etag"] == first.headers["etag"]
    same = await edge.post(
        "/v1/personalize", "u-1", body("u-1"), **{"if-none-match": first.headers["etag"]}
    )
    # a POST's failed precondition: 412, not GET's 304 (RFC 9110, 13.1.2)
    assert same.status_code == 412
    assert same.json()["field"] == "If-None-Match"
    assert same.json()["error"] == "precondition_failed"
    assert same.headers["etag"] == first.headers["etag"]
    other = await edge.post("/v1/personalize", "u-2", body("u-2"))
    assert other.headers["etag"] != first.headers["etag"]  # another user's answer


async def test_bodies_over_the_limit_get_413(edge: EdgeUnderTest) -> None:
    huge = b'{"user_id": "u-1", "pad": "' + b"x" * 70_000 + b'"}'
    response = await edge.client.post(
        "/v1/personalize",
        content=huge,
        headers={**edge.auth("u-1"), "content-type": "application/json"},
    )
    assert response.status_code == 413
    assert response.json()["error"] == "payload_too_large"


async def test_a_price_range_with_min_above_max_is_empty_not_an_error(
    edge: EdgeUnderTest,
) -> None:
    empty = {"price_range": {"min": 300, "max": 10}}
    assert (await edge.personalize("u-1", constraints=empty)).items == []
    again = await edge.personalize("u-1", constraints=empty)  # the entry, empty
    assert (again.items, again.metadata.cache_hit) == ([], True)


async def test_every_route_limits_bodies_not_only_the_api_posts(edge: EdgeUnderTest) -> None:
    response = await edge.client.request("GET", "/readyz", content=b"x" * 70_000)
    assert response.status_code == 413
    assert response.json()["field"] == "body"


async def test_a_wrong_method_is_a_405_with_allow(edge: EdgeUnderTest) -> None:
    for path in ("/v1/personalize", "/v1/feedback", "/v1/explain"):
        for method in ("GET", "PUT", "DELETE"):
            response = await edge.client.request(method, path, headers=edge.auth("u-1"))
            assert response.status_code == 405, (method, path)
            assert response.headers["allow"] == "POST"
            assert response.json()["error"] == "method_not_allowed"
    response = await edge.client.post("/healthz")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET"


async def test_an_expired_entry_is_served_stale_while_the_origin_is_down(
    edge: EdgeUnderTest,
) -> None:
    fresh = await edge.personalize()
    edge.clock.tick(900)  # expired, and the next 15-minute bucket
    edge.network.down = True
    stale = await edge.post("/v1/personalize", "u-1", body("u-1"))
    assert (stale.status_code, stale.headers["x-cache"]) == (200, "STALE")
    answer = PersonalizeResponse.model_validate_json(stale.content)
    assert answer.metadata.degraded
    assert [i.item_id for i in answer.items] == [i.item_id for i in fresh.items]
    edge.network.down = False  # the origin is back: a normal fill again
    back = await edge.post("/v1/personalize", "u-1", body("u-1"))
    assert back.headers["x-cache"] == "MISS"
    assert not PersonalizeResponse.model_validate_json(back.content).metadata.degraded


async def test_near_expiry_the_entry_is_served_and_refreshed_in_the_background(
    edge: EdgeUnderTest,
) -> None:
    # one interaction: a casual user in an active session, whose entries (the origin's
    # ranking for them, cached for them) live 180 s
    assert (await edge.feedback("u-1", "it-000001")).status_code == 200
    await edge.personalize()
    edge.clock.tick(170)  # within the last 10% of 180 s, same 15-minute bucket
    calls = edge.network.calls
    served = await edge.post("/v1/personalize", "u-1", body("u-1"))
    assert served.headers["x-cache"] == "HIT"
    assert served.headers["age"] == "170"
    for _ in range(100):  # the refresh runs in the background
        if edge.network.calls > calls:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    assert edge.network.calls == calls + 1
    refreshed = await edge.post("/v1/personalize", "u-1", body("u-1"))
    assert (refreshed.headers["x-cache"], refreshed.headers["age"]) == ("HIT", "0")


async def test_no_refresh_when_the_key_ends_with_its_bucket_first(edge: EdgeUnderTest) -> None:
    await edge.personalize()  # a new user's entry: 900 s, as long as the bucket
    edge.clock.tick(850)
    calls = edge.network.calls
    assert (await edge.personalize()).metadata.cache_hit
    await asyncio.sleep(0.05)
    assert edge.network.calls == calls  # the next bucket has another key anyway


async def test_concurrent_misses_of_one_key_make_one_origin_call(edge: EdgeUnderTest) -> None:
    calls = edge.network.calls
    users = [f"c-{n}" for n in range(30)]  # new users: one segment-keyed entry
    answers = await asyncio.gather(
        *(
            edge.post(
                "/v1/personalize", u, body(u, context={"page_type": "search", "device": "tv"})
            )
            for u in users
        )
    )
    assert all(a.status_code == 200 for a in answers)
    assert edge.network.calls == calls + 1
    assert sorted(
        PersonalizeResponse.model_validate_json(a.content).user_id for a in answers
    ) == sorted(users)


async def test_over_the_rate_limit_a_cached_answer_is_served_then_429(
    edge: EdgeUnderTest,
) -> None:
    free = {"tier": "free"}
    for _n in range(10):  # free tier: 10 personalize requests per second per user
        response = await edge.client.post(
            "/v1/personalize", json=body("r-1"), headers=edge.auth("r-1", **free)
        )
        assert response.status_code == 200
        assert not PersonalizeResponse.model_validate_json(response.content).metadata.rate_limited
    limited = await edge.client.post(
        "/v1/personalize", json=body("r-1"), headers=edge.auth("r-1", **free)
    )
    assert limited.status_code == 200
    assert PersonalizeResponse.model_validate_json(limited.content).metadata.rate_limited
    feedback = {"user_id": "r-1", "feedback": [{"item_id": "it-000001", "action": "view"}]}
    statuses = [
        (await edge.client.post("/v1/feedback", json=feedback, headers=edge.auth("r-1", **free)))
        for _ in range(51)
    ]
    assert [r.status_code for r in statuses[:50]] == [200] * 50
    assert statuses[50].status_code == 429
    assert statuses[50].headers["retry-after"] == "1"
    edge.clock.tick(1)
    again = await edge.client.post("/v1/feedback", json=feedback, headers=edge.auth("r-1", **free))
    assert again.status_code == 200


async def test_metrics_count_how_answers_were_served(edge: EdgeUnderTest) -> None:
    await edge.personalize()
    await edge.personalize()
    edge.network.down = True
    edge.clock.tick(900)
    await edge.personalize()
    text = (await edge.client.get("/metrics")).text
    assert 'perso_edge_answers_total{region="us-east",served="hit"} 1.0' in text
    assert 'perso_edge_answers_total{region="us-east",served="miss"} 1.0' in text
    assert 'perso_edge_answers_total{region="us-east",served="stale"} 1.0' in text
    assert 'perso_edge_cache_entries{region="us-east"} 1.0' in text
    assert 'perso_edge_origin_circuit_state{region="us-east",state="closed"}' in text


async def test_edges_of_one_pop_share_entries_through_its_redis(
    origin_settings: Settings, redis_url: str
) -> None:
    # The cache path: the origin ranks, the PoP's processes share what it ranked.
    settings = origin_settings.model_copy(
        update={"edge_store": "redis", "edge_store_url": redis_url, "edge_ranking": False}
    )
    # The real clock: the store's keys expire at absolute times, by Redis's clock.
    origin_app = create_origin(settings)
    network = Switchable(origin_app)
    first = create_edge(settings, region="pop-1", origin_transport=network)
    second = create_edge(settings, region="pop-1", origin_transport=network)
    headers = bearer(user_token("u-1", now_s=time.time()))
    async with (
        serving(origin_app, "http://origin"),
        serving(first, "http://edge-1") as one,
        serving(second, "http://edge-2") as two,
    ):
        calls = network.calls
        filled = await one.post("/v1/personalize", json=body("u-1"), headers=headers)
        assert filled.headers["x-cache"] == "MISS"
        shared = await two.post("/v1/personalize", json=body("u-1"), headers=headers)
        assert shared.headers["x-cache"] == "HIT"  # filled by the other process of the PoP
        assert shared.json()["items"] == filled.json()["items"]
        assert network.calls == calls + 1


async def test_a_returning_power_user_finds_the_next_entry_prewarmed(
    origin_settings: Settings, redis: Redis
) -> None:
    # The origin ranks pat (PERSO_EDGE_RANKING off): what is prewarmed is its entry.
    settings = origin_settings.model_copy(update={"edge_settle_s": 0.1, "edge_ranking": False})
    clock = FakeClock()
    origin_app = create_origin(settings, rng=np.random.default_rng(7))
    network = Switchable(origin_app)
    edge_app = create_edge(settings, region="us-east", clock=clock, origin_transport=network)
    await set_user_model(redis, "pat", np.ones(32))
    async with serving(origin_app, "http://origin"), serving(edge_app, "http://edge") as client:
        edge = EdgeUnderTest(client, network, clock)
        await edge.personalize("pat")  # the edge learns what pat asks for
        assert (await edge.feedback("pat", *(f"it-{n:06d}" for n in range(11)))).status_code == 200
        prewarmer = edge_app.fastapi.state.edge.prewarmer
        for _ in range(200):  # after the settle window, in the background
            if prewarmer.counters.filled:
                break
            await asyncio.sleep(0.02)
        assert prewarmer.counters.filled == 1
        back = await edge.personalize("pat")  # keyed by the new interactions: prewarmed
        assert back.metadata.cache_hit
        assert {"collaborative", "content"} & {i.source for i in back.items}


async def subscribed(edge_app: EdgeFront) -> None:
    """Wait until the edge's subscriber has taken its starting point: a message published
    after that is one it applies (before it, a fresh start skips it, as it should)."""
    for _ in range(1000):
        subscriber = edge_app.fastapi.state.subscriber
        if subscriber is not None and subscriber.position is not None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the edge's subscriber did not start in time")


async def applied(edge_app: EdgeFront, count: int) -> None:
    """Wait until the edge's subscriber has applied ``count`` messages."""
    for _ in range(1000):
        sync = edge_app.fastapi.state.edge.sync
        if sync is not None and sync.counters.applied >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the edge did not apply the sync messages in time")


@pytest.fixture
async def synced(
    origin_settings: Settings, redis: Redis
) -> AsyncIterator[tuple[EdgeUnderTest, EdgeFront, SyncPublisher]]:
    clock = FakeClock()
    origin_app = create_origin(origin_settings, rng=np.random.default_rng(7))
    network = Switchable(origin_app)
    edge_app = create_edge(origin_settings, region="us-east", clock=clock, origin_transport=network)
    publisher = SyncPublisher(redis, origin_settings.regions, clock)
    async with serving(origin_app, "http://origin"), serving(edge_app, "http://edge") as client:
        await subscribed(edge_app)
        yield EdgeUnderTest(client, network, clock), edge_app, publisher


async def test_a_tag_purge_removes_the_entries_showing_the_item(
    synced: tuple[EdgeUnderTest, EdgeFront, SyncPublisher],
) -> None:
    edge, edge_app, publisher = synced
    shown = await edge.personalize()
    books = {"constraints": {"categories": ["books"]}}
    await edge.personalize(**books)  # an entry of books only
    assert (await edge.personalize()).metadata.cache_hit
    only_first = next(i.item_id for i in shown.items if i.metadata.category != "Books")
    await publisher.publish([PurgeTag(only_first, soft=False)])
    await applied(edge_app, 1)
    assert not (await edge.personalize()).metadata.cache_hit  # it showed the item: purged
    assert (await edge.personalize(**books)).metadata.cache_hit  # it did not: kept


async def test_a_model_epoch_makes_entries_stale_but_usable_when_the_origin_fails(
    synced: tuple[EdgeUnderTest, EdgeFront, SyncPublisher],
) -> None:
    edge, edge_app, publisher = synced
    await edge.personalize()
    edge.clock.tick(1)
    await publisher.publish([ModelEpoch(2, "nn-2")])
    await applied(edge_app, 1)
    edge.network.down = True
    stale = await edge.post("/v1/personalize", "u-1", body("u-1"))
    assert stale.headers["x-cache"] == "STALE"  # older than the epoch: only on error
    edge.network.down = False
    fresh = await edge.post("/v1/personalize", "u-1", body("u-1"))
    assert fresh.headers["x-cache"] == "MISS"
    assert (await edge.personalize()).metadata.cache_hit


async def test_a_purchase_through_the_edge_drops_the_buyers_own_entries(
    synced: tuple[EdgeUnderTest, EdgeFront, SyncPublisher], redis: Redis
) -> None:
    edge, edge_app, _ = synced
    await set_user_model(redis, "pat", np.ones(32))
    await edge.feedback("pat", *(f"it-{n:06d}" for n in range(11)))  # a power user now
    edge.clock.tick(3)  # past the settle window
    await edge.personalize("pat")
    assert (await edge.personalize("pat")).metadata.cache_hit
    bought = [{"item_id": "it-000100", "action": "purchase"}]
    response = await edge.post("/v1/feedback", "pat", {"user_id": "pat", "feedback": bought})
    assert response.status_code == 200
    await applied(edge_app, 1)  # the origin published InvalidateUser("pat")
    text = (await edge.client.get("/metrics")).text
    assert 'perso_edge_sync_messages_total{region="us-east",type="InvalidateUser"} 1.0' in text
    assert "perso_edge_sync_publish_to_applied_seconds_bucket" in text
    assert 'perso_edge_sync_cursor_lag_seconds{region="us-east"} 0.0' in text


async def test_an_edge_holds_the_models_of_its_users_as_the_workers_write_them(
    synced: tuple[EdgeUnderTest, EdgeFront, SyncPublisher], origin_settings: Settings, redis: Redis
) -> None:
    edge, edge_app, publisher = synced
    node: Edge = edge_app.fastapi.state.edge
    assert node.user_models is not None
    shown = await edge.personalize("ann")
    assert (await edge.feedback("ann", shown.items[0].item_id)).status_code == 200
    updates = EdgeUpdates(publisher)
    worker = StreamWorker(
        redis,
        partitions=origin_settings.event_partitions,
        dim=origin_settings.embedding_dim,
        consumer="w-edge",
        clock=edge.clock,
        block_ms=20,
        on_batch=updates.publish,
    )
    while await worker.poll(">") > 0:
        pass
    assert updates.published == 1
    await applied(edge_app, 1)
    held = node.user_models.get("ann")
    assert held is not None
    stored = decode_record(await redis.get(keys.user_record("ann")), origin_settings.embedding_dim)
    assert stored.model is not None
    assert held.version == stored.version
    assert held.model.mean.tolist() == pytest.approx(stored.model.mean.tolist(), abs=1e-3)
    # a user this edge never served: their update passes by
    await publisher.publish(
        [UserUpdate("bob", 4, model=model_bytes(UserModel.prior(origin_settings.embedding_dim)))]
    )
    await applied(edge_app, 2)
    assert "bob" not in node.user_models
    metrics = (await edge.client.get("/metrics")).text
    assert 'perso_edge_user_models{region="us-east"} 1.0' in metrics
