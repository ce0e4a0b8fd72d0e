"""Feedback changes what the origin knows: recent interactions, session and emotional state
at once (the origin records them); the users' models and the items' posteriors once a
stream worker has read the events (the origin appends them, nothing more). Over HTTP
against the real app, with a real worker over the same Redis and clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
import pytest
from pydantic import SecretStr
from redis.asyncio import Redis

from config.settings import Settings
from origin.app import create_app
from origin.learned.posteriors import ALL_CONTEXTS, ItemOutcome, PosteriorConfig, PosteriorStore
from origin.learned.user_models import decode_record, observation_hash
from origin.ranking.history import read_history
from origin.runtime import Origin
from origin.worker.consumer import StreamWorker
from protocol import keys
from protocol.api import FILL_SCOPE_HEADER, SEGMENT_SCOPE, PersonalizeResponse
from protocol.decisions import CONTEXT_HEADER, DECISION_FIELD, decode_entry
from protocol.events import EVENT_FIELD, decode_event
from tests.apps import serving
from tests.fakes import FakeClock
from tests.integration.test_learning_loop import written

pytestmark = pytest.mark.cluster


# 2026-01-01 19:00 UTC: "evening" in UTC.
EVENING = 1_767_294_000.0
NO_DECAY = PosteriorConfig(decay_half_life_s=0)


@dataclass
class Served:
    client: httpx.AsyncClient
    origin: Origin
    worker: StreamWorker
    clock: FakeClock

    async def learn(self) -> None:
        """The worker reads what there is (decisions the origin logged, events)."""
        await written(self.origin.decisions)
        while await self.worker.poll(">") > 0:
            pass


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(EVENING)


@asynccontextmanager
async def running(
    origin_settings: Settings, redis: Redis, clock: FakeClock, **overrides: object
) -> AsyncIterator[Served]:
    """An origin (``overrides`` in its settings) and a worker, on ``clock``."""
    settings = origin_settings.model_copy(update={"bandit_decay_half_life_s": 0.0, **overrides})
    app = create_app(settings, clock=clock, rng=np.random.default_rng(5))
    async with serving(app, "http://origin") as client:
        worker = StreamWorker(
            redis,
            partitions=settings.event_partitions,
            dim=settings.embedding_dim,
            consumer="w-1",
            clock=clock,
            block_ms=20,
            posteriors=NO_DECAY,
        )
        yield Served(client, app.state.origin, worker, clock)


@pytest.fixture
async def served(
    origin_settings: Settings, redis: Redis, clock: FakeClock
) -> AsyncIterator[Served]:
    async with running(origin_settings, redis, clock) as running_origin:
        yield running_origin


@pytest.fixture
def origin(served: Served) -> httpx.AsyncClient:
    return served.client


def request(user: str, **parts: Any) -> dict[str, Any]:
    return {"user_id": user, "context": {"page_type": "home", "device": "desktop"}, **parts}


async def personalize(origin: httpx.AsyncClient, user: str, **parts: Any) -> PersonalizeResponse:
    response = await origin.post("/v1/personalize", json=request(user, **parts))
    assert response.status_code == 200, response.text
    return PersonalizeResponse.model_validate_json(response.content)


async def feedback(
    origin: httpx.AsyncClient, user: str, *items: dict[str, Any], **parts: Any
) -> None:
    body = {"user_id": user, "feedback": list(items), **parts}
    response = await origin.post("/v1/feedback", json=body)
    assert response.status_code == 200, response.text


async def test_feedback_is_appended_once_and_learnt_by_the_worker(
    served: Served, redis: Redis, origin_settings: Settings
) -> None:
    bought = {"item_id": "it-000042", "action": "purchase", "interaction_id": "ix-buy"}
    dismissed = {"item_id": "it-000043", "action": "dismiss", "interaction_id": "ix-no"}
    await feedback(served.client, "u-1", bought, dismissed)
    await feedback(served.client, "u-1", bought, dismissed)  # a retry appends nothing
    stream = keys.events_stream(keys.partition_of("u-1", origin_settings.event_partitions))
    events = [decode_event(fields[EVENT_FIELD]) for _, fields in await redis.xrange(stream)]
    assert [(e.interaction_id, e.action) for e in events] == [
        ("ix-buy", "purchase"),
        ("ix-no", "dismiss"),
    ]
    assert {e.accepted_ms for e in events} == {int(EVENING * 1000)}
    # the origin learns nothing itself
    store = PosteriorStore(redis, NO_DECAY)
    assert not (await store.read_cell(ALL_CONTEXTS, ["it-000042", "it-000043"])).observed.any()
    assert await redis.get(keys.user_record("u-1")) is None
    await served.learn()
    everywhere = await store.read_cell(ALL_CONTEXTS, ["it-000042", "it-000043"])
    assert everywhere.alpha.tolist() == [2.0, 1.0]
    assert everywhere.beta.tolist() == [1.0, 2.0]
    record = decode_record(await redis.get(keys.user_record("u-1")), origin_settings.embedding_dim)
    assert record.model is not None
    assert sorted(record.window) == sorted(observation_hash(i) for i in ("ix-buy", "ix-no"))


async def test_feedback_is_recorded_in_the_users_recent_interactions(
    origin: httpx.AsyncClient, redis: Redis
) -> None:
    await feedback(
        origin,
        "u-2",
        {"item_id": "it-000007", "action": "click", "duration_ms": 3000, "interaction_id": "a"},
        {"item_id": "it-000008", "action": "view", "interaction_id": "b"},
    )
    await feedback(
        origin, "u-2", {"item_id": "it-000007", "action": "click", "interaction_id": "a"}
    )
    state = await read_history(redis, "u-2")
    assert sorted(i.interaction_id for i in state.interactions) == ["a", "b"]
    assert all(i.category for i in state.interactions)  # known items carry their category
    assert await redis.ttl(keys.user_interactions("u-2")) > 0


async def test_a_users_clicks_steer_the_next_answer(served: Served) -> None:
    origin, clock = served.client, served.clock
    before = await personalize(origin, "u-3", options={"exploration_rate": 0})
    chosen = next(
        i for i in before.items if i.metadata.category != before.items[0].metadata.category
    )
    for k in range(3):
        clock.tick(5)
        await feedback(
            origin,
            "u-3",
            {"item_id": chosen.item_id, "action": "click", "interaction_id": f"c{k}"},
            request_id=before.request_id,
        )
    await served.learn()  # the worker moves the user's model toward the item
    after = await personalize(
        origin, "u-3", options={"exploration_rate": 0, "include_explanation": True}
    )
    categories = [i.metadata.category for i in after.items]
    assert categories.count(chosen.metadata.category) > [
        i.metadata.category for i in before.items
    ].count(chosen.metadata.category)
    # the user's own neighbourhood, or the session's, and the explanations say so
    assert {"collaborative", "content"} & {i.source for i in after.items}
    signals = {s for i in after.items if i.explanation for s in i.explanation.signals}
    assert {"viewed_similar", "category_match"} & signals


async def test_a_frustrated_session_fires_the_frustration_rules(
    origin_settings: Settings, redis: Redis, clock: FakeClock
) -> None:
    # an item everybody engages with: what a frustrated user is shown with confidence
    sure = "it-000011"
    async with redis.pipeline(transaction=False) as pipe:
        outcome = [ItemOutcome(sure, 60.0, 4.0)]
        store = PosteriorStore(redis, NO_DECAY)
        await store.queue_add(pipe, [ALL_CONTEXTS], "r-0", outcome, int(clock() * 1000))
        await pipe.execute()
    async with running(origin_settings, redis, clock, emotion_rules=True) as served:
        await personalize(served.client, "u-4")
        for k in range(6):
            clock.tick(3)
            dismiss = {"item_id": f"it-{k:06d}", "action": "dismiss", "interaction_id": f"d{k}"}
            await feedback(served.client, "u-4", dismiss)
        explained = {"include_explanation": True}
        frustrated = await personalize(served.client, "u-4", options=explained)
        calm = await personalize(served.client, "u-calm", options=explained)
    frustration = {"frustrated_high_confidence", "frustrated_less_exploration"}
    assert frustration & rules_of(frustrated)
    assert not frustration & rules_of(calm)


def rules_of(answer: PersonalizeResponse) -> set[str]:
    return {r for i in answer.items if i.explanation for r in i.explanation.rules}


@pytest.fixture
async def guarded(origin_settings: Settings, clock: FakeClock) -> AsyncIterator[httpx.AsyncClient]:
    settings = origin_settings.model_copy(update={"origin_token": SecretStr("s3cret")})
    async with serving(create_app(settings, clock=clock), "http://origin") as client:
        yield client


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"authorization": "Bearer wrong"}, 401),
        ({"authorization": "Basic czNjcmV0"}, 401),
        ({"authorization": "Bearer s3cret"}, 200),
    ],
    ids=["missing", "wrong", "other-scheme", "right"],
)
async def test_with_a_service_token_the_origin_requires_it(
    guarded: httpx.AsyncClient, headers: dict[str, str], status: int
) -> None:
    for path, payload in (
        ("/v1/personalize", request("u-5")),
        ("/v1/feedback", {"user_id": "u-5", "feedback": [{"item_id": "x", "action": "view"}]}),
    ):
        response = await guarded.post(path, json=payload, headers=headers)
        assert response.status_code == status, response.text
        if status == 401:
            assert response.json()["field"] == "authorization"


async def test_feedback_on_a_segment_fill_is_learnt_in_the_cell_it_was_served_for(
    served: Served, redis: Redis, origin_settings: Settings
) -> None:
    response = await served.client.post(
        "/v1/personalize", json=request("u-6"), headers={FILL_SCOPE_HEADER: SEGMENT_SCOPE}
    )
    assert response.status_code == 200
    answer = PersonalizeResponse.model_validate_json(response.content)
    assert response.headers[CONTEXT_HEADER] == "desktop_evening"
    clicked = answer.items[0].item_id
    await feedback(
        served.client,
        "u-6",
        {"item_id": clicked, "action": "click", "interaction_id": "ix-6"},
        request_id=answer.request_id,
    )
    await served.learn()
    stream = keys.decisions_stream(keys.partition_of("u-6", origin_settings.event_partitions))
    [(_, fields)] = await redis.xrange(stream)
    [decision] = decode_entry(fields[DECISION_FIELD])
    assert (decision.audience, decision.context) == ("segment:shared", "desktop_evening")
    served.clock.tick(origin_settings.reward_wait_s)
    assert await served.worker.joins.close_due(int(served.clock() * 1000)) == 1
    learnt = await PosteriorStore(redis, NO_DECAY).read_cell("desktop_evening", [clicked])
    assert (learnt.alpha.tolist(), learnt.beta.tolist()) == ([2.0], [1.0])
