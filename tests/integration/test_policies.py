"""Ranking policies (issue 19): defined through the admin API, promoted under the
model-deployment lock through the fenced pointer, live at once on the promoting origin,
on another through the origins' stream (or its poll of the pointer), and on an edge
through the sync stream; rolled back by the same call. The origin and edge apps in
process, the suite's Redis between them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi import FastAPI
from pydantic import SecretStr
from redis.asyncio import Redis

from config.settings import Settings, configured_policy
from coordination.exceptions import StaleFencingToken
from coordination.fencing import FencedPointer
from coordination.redis_lock import RedisLock
from edge.app import create_app as create_edge
from edge.node import Edge
from origin.app import create_app
from origin.catalog.deployment import DEPLOYMENT_RESOURCE, ModelDeployments, decode
from origin.catalog.ingest import ensure_sample_catalog
from origin.runtime import Origin
from protocol import keys
from protocol.api import PersonalizeResponse
from protocol.audience import AUDIENCE_HEADER, USER
from protocol.decisions import (
    DECISION_FIELD,
    POLICY_HEADER,
    PROPENSITIES_HEADER,
    decode_entry,
    parse_propensities,
)
from protocol.policies import (
    CONFIGURED,
    LIVE_POLICY_PATH,
    Policy,
    PolicyConfig,
    decode_live,
    decode_policy,
)
from protocol.segments import Segment
from sync.codec import decode_entry as decode_sync_entry
from sync.messages import ItemsChanged, ModelEpoch
from sync.publisher import SyncPublisher
from tests.apps import serving
from tests.credentials import bearer, user_token
from tests.integration.test_edge_api import body
from tests.integration.test_edge_ranking import running
from tests.integration.test_learning_loop import written

TOKEN = "policies-admin-token"
ADMIN = {"authorization": f"Bearer {TOKEN}"}
CANDIDATE = {"exploration_weight": 0.0, "diversity_weight": 0.3, "user_prior_scale": 8}


@pytest.fixture
def settings(origin_settings: Settings) -> Settings:
    return origin_settings.model_copy(
        update={"admin_token": SecretStr(TOKEN), "policy_poll_s": 0.05}
    )


@asynccontextmanager
async def origin_serving(settings: Settings) -> AsyncIterator[tuple[Origin, httpx.AsyncClient]]:
    app = create_app(settings, rng=np.random.default_rng(5))
    async with serving(app, "http://origin") as client:
        client.headers.update(ADMIN)
        yield origin_of(app), client


@pytest.fixture
async def origin(settings: Settings) -> AsyncIterator[tuple[Origin, httpx.AsyncClient]]:
    async with origin_serving(settings) as served:
        yield served


def origin_of(app: FastAPI) -> Origin:
    origin: Origin = app.state.origin
    return origin


async def define(client: httpx.AsyncClient, name: str, **config: Any) -> httpx.Response:
    return await client.put(f"/v1/admin/policies/{name}", json=config)


async def promote(
    client: httpx.AsyncClient, name: str, version: str | None = None
) -> httpx.Response:
    if version is None:
        return await client.post(f"/v1/admin/policies/{name}/promote")
    return await client.post(f"/v1/admin/policies/{name}/promote", json={"version": version})


async def personalize(client: httpx.AsyncClient, user: str = "u-1") -> httpx.Response:
    body = {"user_id": user, "context": {"page_type": "home", "device": "mobile"}}
    answer = await client.post("/v1/personalize", json=body)
    assert answer.status_code == 200, answer.text
    return answer


# --- the registry, through the API ---------------------------------------------------------


async def test_a_definition_is_a_version_and_the_same_again_is_that_version(
    origin: tuple[Origin, httpx.AsyncClient],
) -> None:
    _, client = origin
    first = await define(client, "ranker-b", **CANDIDATE)
    assert first.status_code == 201, first.text
    assert first.json() | {"latency_ms": None} == first.json() | {
        "name": "ranker-b",
        "version": "1",
        "label": "ranker-b/1",
        "kind": "ranker",
        "exploration_weight": 0.0,
        "diversity_weight": 0.3,
        "emotion_rules": False,
        "user_prior_scale": 8.0,
        "live": False,
        "latency_ms": None,
    }
    again = await define(client, "ranker-b", **CANDIDATE)
    assert (again.status_code, again.json()["version"]) == (200, "1")
    changed = await define(client, "ranker-b", **{**CANDIDATE, "emotion_rules": True})
    assert (changed.status_code, changed.json()["version"]) == (201, "2")
    # an older configuration again is a new version: versions only go forward
    back = await define(client, "ranker-b", **CANDIDATE)
    assert (back.status_code, back.json()["version"]) == (201, "3")
    assert (await define(client, "random", kind="random")).status_code == 201
    listed = (await client.get("/v1/admin/policies")).json()
    assert listed["live"] == f"{CONFIGURED}/1"
    labels = [(p["label"], p["live"]) for p in listed["policies"]]
    assert labels == [
        ("configured/1", True),
        ("random/1", False),
        ("ranker-b/1", False),
        ("ranker-b/2", False),
        ("ranker-b/3", False),
    ]
    one = (await client.get("/v1/admin/policies/ranker-b")).json()
    assert [p["version"] for p in one["policies"]] == ["1", "2", "3"]


@pytest.mark.parametrize(
    ("name", "config", "field"),
    [
        ("b", {"exploration_weight": 1.5}, "exploration_weight"),
        ("b", {"diversity_weight": "0.3"}, "diversity_weight"),
        ("b", {"user_prior_scale": 0}, "user_prior_scale"),
        ("b", {"emotion_rules": 1}, "emotion_rules"),
        ("b", {"kind": "bandit"}, "kind"),
        ("b", {"temperature": 1}, "temperature"),
        ("Bad", {}, "name"),
        ("-b", {}, "name"),
    ],
)
async def test_a_bad_definition_is_a_400_naming_the_field(
    origin: tuple[Origin, httpx.AsyncClient], name: str, config: dict[str, Any], field: str
) -> None:
    _, client = origin
    answer = await define(client, name, **config)
    assert answer.status_code == 400, answer.text
    assert answer.json()["field"] == field, answer.json()


async def test_the_configured_policy_cannot_be_defined(
    origin: tuple[Origin, httpx.AsyncClient],
) -> None:
    _, client = origin
    taken = await define(client, CONFIGURED, exploration_weight=0.2)
    assert (taken.status_code, taken.json()["field"]) == (409, "name")
    assert "settings" in taken.json()["reason"]


async def test_unknown_policies_and_versions_are_404s(
    origin: tuple[Origin, httpx.AsyncClient],
) -> None:
    _, client = origin
    assert (await client.get("/v1/admin/policies/nobody")).status_code == 404
    missing = await promote(client, "nobody")
    assert (missing.status_code, missing.json()["field"]) == (404, "name")
    await define(client, "ranker-b", **CANDIDATE)
    missing = await promote(client, "ranker-b", "7")
    assert (missing.status_code, missing.json()["field"]) == (404, "version")
    assert (await promote(client, "ranker-b", "newest")).status_code == 404
    assert (await promote(client, CONFIGURED, "2")).status_code == 404


async def test_the_policy_routes_want_the_admin_token(
    origin: tuple[Origin, httpx.AsyncClient],
) -> None:
    _, client = origin
    wrong = {"authorization": "Bearer wrong"}
    for method, url in (
        ("GET", "/v1/admin/policies"),
        ("GET", "/v1/admin/policies/b"),
        ("PUT", "/v1/admin/policies/b"),
        ("POST", "/v1/admin/policies/b/promote"),
    ):
        assert (await client.request(method, url, headers=wrong)).status_code == 401, url


# --- promotion ------------------------------------------------------------------------------


async def test_a_promoted_policy_chooses_the_next_answer_and_is_logged_with_it(
    origin: tuple[Origin, httpx.AsyncClient], redis: Redis
) -> None:
    running, client = origin
    before = await personalize(client)
    assert PersonalizeResponse.model_validate_json(before.content).metadata.policy == "configured/1"
    await define(client, "ranker-b", **CANDIDATE)
    promoted = await promote(client, "ranker-b")
    assert promoted.status_code == 200, promoted.text
    answer = promoted.json()
    assert (answer["epoch"], answer["policy"], answer["previous"]) == (
        1,
        "ranker-b/1",
        "configured/1",
    )
    assert answer["model_version"] == running.settings.model_version
    # live here at once, its rules those of the policy
    rules = running.ranking
    assert (rules.exploration_weight, rules.diversity_weight) == (0.0, 0.3)
    after = await personalize(client)
    response = PersonalizeResponse.model_validate_json(after.content)
    assert response.metadata.policy == after.headers[POLICY_HEADER] == "ranker-b/1"
    # exploration 0: ranked by the means, deterministic
    assert set(parse_propensities(after.headers[PROPENSITIES_HEADER], len(response.items))) == {1.0}
    await written(running.decisions)
    stream = keys.decisions_stream(keys.partition_of("u-1", running.settings.event_partitions))
    logged = [d for _, f in await redis.xrange(stream) for d in decode_entry(f[DECISION_FIELD])]
    assert [(d.policy, d.policy_version) for d in logged] == [
        ("configured", "1"),
        ("ranker-b", "1"),
    ]
    assert logged[1].request_id == response.request_id
    # the pointer holds it, and the regions heard it
    stored = decode(await FencedPointer(redis, keys.MODEL_DEPLOYMENT).read())
    assert stored is not None
    assert stored.policy is not None
    assert stored.policy.label == "ranker-b/1"
    entries = await redis.xrange(keys.edge_sync_stream("us-east"))
    sent = [decode_sync_entry(fields)[0].message for _, fields in entries]
    # beside the catalog the origin announced at start (for the edges' item vectors)
    [message] = [m for m in sent if not isinstance(m, ItemsChanged)]
    assert isinstance(message, ModelEpoch)
    assert message.policy is not None
    assert decode_policy(message.policy) == stored.policy
    assert (await client.get("/v1/admin/policies")).json()["live"] == "ranker-b/1"


async def test_a_roll_back_is_a_promotion_of_the_older_version(
    origin: tuple[Origin, httpx.AsyncClient],
) -> None:
    running, client = origin
    await define(client, "ranker-b", **CANDIDATE)
    await define(client, "ranker-b", **{**CANDIDATE, "exploration_weight": 0.2})
    assert (await promote(client, "ranker-b")).json()["policy"] == "ranker-b/2"
    back = (await promote(client, "ranker-b", "1")).json()
    assert (back["epoch"], back["policy"], back["previous"]) == (2, "ranker-b/1", "ranker-b/2")
    assert running.live.label == "ranker-b/1"
    home = (await promote(client, CONFIGURED)).json()
    assert (home["epoch"], home["policy"], home["previous"]) == (3, "configured/1", "ranker-b/1")
    assert running.ranking.exploration_weight == running.settings.exploration_weight
    response = PersonalizeResponse.model_validate_json((await personalize(client)).content)
    assert response.metadata.policy == "configured/1"


async def test_a_model_deployment_keeps_the_policy_and_a_promotion_keeps_the_model(
    origin: tuple[Origin, httpx.AsyncClient], redis: Redis
) -> None:
    running, client = origin
    deployed = await client.post("/v1/admin/model-epoch", json={"model_version": "nn-7"})
    assert deployed.json()["epoch"] == 1
    await define(client, "ranker-b", **CANDIDATE)
    promoted = (await promote(client, "ranker-b")).json()
    assert (promoted["epoch"], promoted["model_version"]) == (2, "nn-7")
    deployed = await client.post("/v1/admin/model-epoch", json={"model_version": "nn-8"})
    assert deployed.json()["epoch"] == 3
    stored = decode(await FencedPointer(redis, keys.MODEL_DEPLOYMENT).read())
    assert stored is not None
    assert stored.policy is not None
    assert (stored.model_version, stored.policy.label) == ("nn-8", "ranker-b/1")
    assert (running.live.epoch, running.live.label) == (3, "ranker-b/1")


async def test_every_answer_and_decision_carries_the_deployed_model_version(
    settings: Settings, origin: tuple[Origin, httpx.AsyncClient], redis: Redis, tmp_path: Path
) -> None:
    running, client = origin
    configured = running.settings.model_version
    before = PersonalizeResponse.model_validate_json((await personalize(client)).content)
    assert before.metadata.model_version == configured
    await client.post("/v1/admin/model-epoch", json={"model_version": "nn-9"})
    after = PersonalizeResponse.model_validate_json((await personalize(client)).content)
    assert after.metadata.model_version == "nn-9"
    await written(running.decisions)
    stream = keys.decisions_stream(keys.partition_of("u-1", running.settings.event_partitions))
    logged = [d for _, f in await redis.xrange(stream) for d in decode_entry(f[DECISION_FIELD])]
    assert [(d.request_id, d.model_version) for d in logged] == [
        (before.request_id, configured),
        (after.request_id, "nn-9"),
    ]
    # an origin that starts after the deployment carries it from its first answer
    elsewhere = settings.model_copy(update={"data_dir": tmp_path / "elsewhere"})
    await ensure_sample_catalog(elsewhere, redis)
    async with origin_serving(elsewhere) as (late, late_client):
        assert late.model_version == "nn-9"
        first = PersonalizeResponse.model_validate_json((await personalize(late_client)).content)
        assert first.metadata.model_version == "nn-9"


async def test_another_origin_switches_too(
    settings: Settings, origin: tuple[Origin, httpx.AsyncClient], redis: Redis, tmp_path: Path
) -> None:
    _, client = origin
    # Another process: the same Redis, its own (local) vector store.
    elsewhere = settings.model_copy(update={"data_dir": tmp_path / "elsewhere"})
    await ensure_sample_catalog(elsewhere, redis)
    async with origin_serving(elsewhere) as (other, other_client):
        assert other.live.label == "configured/1"
        await define(client, "ranker-b", **CANDIDATE)
        await promote(client, "ranker-b")
        for _ in range(100):  # the origins' stream, or the poll every 50 ms
            if other.live.label == "ranker-b/1":
                break
            await asyncio.sleep(0.01)
        assert (other.live.label, other.live.epoch) == ("ranker-b/1", 1)
        assert other.ranking.diversity_weight == 0.3
        answer = await personalize(other_client, "u-2")
        assert answer.headers[POLICY_HEADER] == "ranker-b/1"
    # and a new origin starts with the live one
    async with origin_serving(elsewhere) as (late, _):
        assert late.live.label == "ranker-b/1"


async def test_concurrent_promotions_take_turns_or_are_told_busy(
    origin: tuple[Origin, httpx.AsyncClient], redis: Redis
) -> None:
    running, client = origin
    for n in range(4):
        await define(client, f"p{n}", exploration_weight=n / 10)
    answers = await asyncio.gather(*(promote(client, f"p{n}") for n in range(4)))
    assert {a.status_code for a in answers} <= {200, 409}
    done = [a.json() for a in answers if a.status_code == 200]
    assert done
    epochs = sorted(a["epoch"] for a in done)
    assert epochs == list(range(1, len(done) + 1))
    last = max(done, key=lambda a: a["epoch"])
    stored = decode(await FencedPointer(redis, keys.MODEL_DEPLOYMENT).read())
    assert stored is not None
    assert stored.policy is not None
    assert stored.policy.label == last["policy"] == running.live.label
    assert not await redis.exists(keys.lock(DEPLOYMENT_RESOURCE))


async def test_a_promotion_meeting_a_held_lock_is_a_409_and_changes_nothing(
    origin: tuple[Origin, httpx.AsyncClient], redis: Redis
) -> None:
    running, client = origin
    await define(client, "ranker-b", **CANDIDATE)
    other = RedisLock(redis, lambda: 0.0)
    held = await other.acquire(DEPLOYMENT_RESOURCE, 60_000)
    busy = await promote(client, "ranker-b")
    assert busy.status_code == 409
    assert "in progress" in busy.json()["reason"]
    assert await FencedPointer(redis, keys.MODEL_DEPLOYMENT).read() is None
    assert running.live.label == "configured/1"
    assert await other.release(held)
    assert (await promote(client, "ranker-b")).status_code == 200


async def test_a_promoter_whose_token_is_stale_writes_nothing(
    origin: tuple[Origin, httpx.AsyncClient], redis: Redis
) -> None:
    running, client = origin
    await define(client, "ranker-b", **CANDIDATE)
    pointer = FencedPointer(redis, keys.MODEL_DEPLOYMENT)
    # A newer deployer (a far higher token) has read the pointer: every older one is shut out.
    await pointer.read_as(10**9)
    deployments = ModelDeployments(
        pointer, RedisLock(redis, lambda: 0.0), SyncPublisher(redis, ("us-east",), lambda: 0.0)
    )
    candidate = Policy("ranker-b", "1", PolicyConfig(exploration_weight=0.0))
    with pytest.raises(StaleFencingToken):
        await deployments.promote(candidate, model_version="m")
    # and through the API: a 409, nothing written or announced, the live policy kept
    refused = await promote(client, "ranker-b")
    assert refused.status_code == 409
    assert "overtook" in refused.json()["reason"]
    assert await pointer.read() is None
    entries = await redis.xrange(keys.edge_sync_stream("us-east"))
    sent = [decode_sync_entry(fields)[0].message for _, fields in entries]
    assert not [m for m in sent if isinstance(m, ModelEpoch)]
    assert running.live.label == "configured/1"


# --- the references -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["popular", "random"])
async def test_a_reference_can_be_promoted_and_ranks_by_its_rule(
    origin: tuple[Origin, httpx.AsyncClient], kind: str
) -> None:
    _running, client = origin
    await define(client, kind, kind=kind)
    assert (await promote(client, kind)).status_code == 200
    answer = await personalize(client)
    response = PersonalizeResponse.model_validate_json(answer.content)
    assert response.metadata.policy == answer.headers[POLICY_HEADER] == f"{kind}/1"
    propensities = parse_propensities(answer.headers[PROPENSITIES_HEADER], len(response.items))
    assert len(response.items) == 20
    if kind == "popular":
        assert set(propensities) == {1.0}
        scores = [i.score for i in response.items]
        assert scores == sorted(scores, reverse=True)
    else:
        # 1/n of the candidates retrieved: the same for every item shown
        assert len(set(propensities)) == 1
        assert 0 < propensities[0] <= 1 / 20
    # ranked for the user's request (not the fallback): an edge keeps it as theirs
    assert answer.headers[AUDIENCE_HEADER] == USER


# --- the edge ---------------------------------------------------------------------------------


async def test_an_edge_ranks_by_the_policy_the_sync_stream_brings(settings: Settings) -> None:
    async with running(settings) as stack:
        origin_client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=stack.origin_app), base_url="http://origin"
        )
        origin_client.headers.update(ADMIN)
        node = stack.node
        first, _ = await stack.ask("ann")
        assert (first.metadata.tier, first.metadata.policy) == ("edge", "configured/1")
        stack.clock.tick(1.0)  # the promotion comes after the pool's fill
        await define(origin_client, "ranker-b", **CANDIDATE)
        assert (await promote(origin_client, "ranker-b")).status_code == 200
        for _ in range(300):
            if node.policy.label == "ranker-b/1":
                break
            await asyncio.sleep(0.01)
        assert node.policy.label == "ranker-b/1"
        assert node.sync is not None
        assert node.sync.model_epoch == 1
        assert (node.exploration_weight, node.diversity_weight) == (0.0, 0.3)
        # The pool was filled under the old policy: stale now, refilled, then ranked here.
        after, _ = await stack.ask("ann")
        assert (after.metadata.tier, after.metadata.policy) == ("edge", "ranker-b/1")
        assert node.counters.pool_fills == 2
        again, _ = await stack.ask("ann")
        assert (again.metadata.tier, again.metadata.policy) == ("edge", "ranker-b/1")
        # An edge holding another policy than its pool was filled under (it missed the
        # epoch's message) leaves that ranking to the origin, and reads the origin's live
        # policy: the next requests are ranked here again, by it.
        node.sync.model_epoch = 0
        node.adopt(configured_policy(settings))
        behind, _ = await stack.ask("ann")
        assert (behind.metadata.tier, behind.metadata.policy) == ("origin", "ranker-b/1")
        for _ in range(300):
            if node.policy.label == "ranker-b/1":
                break
            await asyncio.sleep(0.01)
        assert (node.policy.label, node.sync.model_epoch) == ("ranker-b/1", 1)
        caught_up, _ = await stack.ask("ann")
        assert (caught_up.metadata.tier, caught_up.metadata.policy) == ("edge", "ranker-b/1")
        await origin_client.aclose()


async def test_an_edge_started_after_a_promotion_ranks_by_it_from_its_first_request(
    settings: Settings,
) -> None:
    async with running(settings) as stack:
        origin_client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=stack.origin_app), base_url="http://origin"
        )
        origin_client.headers.update(ADMIN)
        await define(origin_client, "ranker-b", **CANDIDATE)
        assert (await promote(origin_client, "ranker-b")).status_code == 200
        await origin_client.aclose()
        # Another edge of the region starts now: the epoch's message came before it listened.
        late = create_edge(
            settings, region="us-east", clock=stack.clock, origin_transport=stack.network
        )
        async with serving(late, "http://late-edge") as client:
            node: Edge = late.fastapi.state.edge
            assert node.policy.label == "ranker-b/1"
            assert node.sync is not None
            assert node.sync.model_epoch == 1
            headers = bearer(user_token("ann", now_s=stack.clock(), segment=Segment.POWER))
            answer = await client.post("/v1/personalize", json=body("ann"), headers=headers)
            assert answer.status_code == 200, answer.text
            first = PersonalizeResponse.model_validate_json(answer.content)
            assert (first.metadata.tier, first.metadata.policy) == ("edge", "ranker-b/1")


async def test_the_live_policy_route_answers_the_policy_and_its_epoch(
    origin: tuple[Origin, httpx.AsyncClient],
) -> None:
    running_origin, client = origin
    client.headers.update(ADMIN)
    epoch, policy = decode_live((await client.get(LIVE_POLICY_PATH)).content)
    assert (epoch, policy.label) == (0, "configured/1")
    await define(client, "ranker-b", **CANDIDATE)
    await promote(client, "ranker-b")
    answer = await client.get(LIVE_POLICY_PATH)
    assert answer.status_code == 200
    epoch, policy = decode_live(answer.content)
    assert (epoch, policy.label) == (1, "ranker-b/1")
    assert policy.config == running_origin.live.policy.config


async def test_an_edge_leaves_a_reference_policy_to_the_origin(settings: Settings) -> None:
    async with running(settings) as stack:
        origin_client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=stack.origin_app), base_url="http://origin"
        )
        origin_client.headers.update(ADMIN)
        await define(origin_client, "popular", kind="popular")
        await promote(origin_client, "popular")
        for _ in range(300):
            if stack.node.policy.label == "popular/1":
                break
            await asyncio.sleep(0.01)
        answer, _ = await stack.ask("ann")
        assert (answer.metadata.tier, answer.metadata.policy) == ("origin", "popular/1")
        await origin_client.aclose()
