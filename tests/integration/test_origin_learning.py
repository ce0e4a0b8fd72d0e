"""Feedback changes what the origin knows: recent interactions, session and emotional
state, bandit posteriors of the context segment. Over HTTP against the real app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from redis.asyncio import Redis

from origin.app import create_app
from origin.bandit import BanditConfig
from origin.posterior_store import PosteriorStore
from origin.user_state import read_state
from perso.settings import Settings
from protocol import keys
from protocol.api import FILL_SCOPE_HEADER, SEGMENT_SCOPE, PersonalizeResponse
from tests.apps import serving
from tests.fakes import FakeClock

# 2026-01-01 19:00 UTC: "evening" in UTC.
EVENING = 1_767_294_000.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(EVENING)


@pytest.fixture
async def origin(origin_settings: Settings, clock: FakeClock) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(create_app(origin_settings, clock=clock), "http://origin") as client:
        yield client


def request(user: str, **parts: Any) -> dict[str, Any]:
    return {"user_id": user, "context": {"page_type": "home", "device": "desktop"}, **parts}


async def personalize(origin: httpx.AsyncClient, user: str, **parts: Any) -> PersonalizeResponse:
    response = await origin.post("/v1/personalize", json=request(user, **parts))
    assert response.status_code == 200, response.text
    return PersonalizeResponse.model_validate_json(response.content)


async def feedback(origin: httpx.AsyncClient, user: str, *items: dict[str, Any]) -> None:
    response = await origin.post("/v1/feedback", json={"user_id": user, "feedback": list(items)})
    assert response.status_code == 200, response.text


async def test_feedback_updates_the_posterior_of_the_context_segment_once(
    origin: httpx.AsyncClient, redis: Redis
) -> None:
    await personalize(origin, "u-1")  # the origin learns the user's device
    bought = {"item_id": "it-000042", "action": "purchase", "interaction_id": "ix-buy"}
    dismissed = {"item_id": "it-000043", "action": "dismiss", "interaction_id": "ix-no"}
    await feedback(origin, "u-1", bought, dismissed)
    await feedback(origin, "u-1", bought, dismissed)  # a retry changes nothing
    store = PosteriorStore(redis, BanditConfig())
    posteriors, weights = await store.read("desktop_evening", ["it-000042", "it-000043"])
    assert posteriors.alpha.tolist() == pytest.approx([2.0, 1.0])
    assert posteriors.beta.tolist() == pytest.approx([1.0, 2.0])
    assert weights.any()  # the segment's context model took its gradient steps


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
    state = await read_state(redis, "u-2")
    assert sorted(i.interaction_id for i in state.interactions) == ["a", "b"]
    assert all(i.category for i in state.interactions)  # known items carry their category
    assert await redis.ttl(keys.user_interactions("u-2")) > 0


async def test_a_users_clicks_steer_the_next_answer(
    origin: httpx.AsyncClient, clock: FakeClock
) -> None:
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
        )
    after = await personalize(
        origin, "u-3", options={"exploration_rate": 0, "include_explanation": True}
    )
    categories = [i.metadata.category for i in after.items]
    assert categories.count(chosen.metadata.category) > [
        i.metadata.category for i in before.items
    ].count(chosen.metadata.category)
    assert any(i.source == "content" for i in after.items)  # the session's neighbours
    signals = {s for i in after.items if i.explanation for s in i.explanation.signals}
    assert "viewed_similar" in signals


async def test_a_frustrated_session_fires_the_frustration_rules(
    origin: httpx.AsyncClient, clock: FakeClock
) -> None:
    await personalize(origin, "u-4")
    for k in range(6):
        clock.tick(3)
        await feedback(
            origin,
            "u-4",
            {"item_id": f"it-{k:06d}", "action": "dismiss", "interaction_id": f"d{k}"},
        )
    answer = await personalize(origin, "u-4", options={"include_explanation": True})
    rules = {r for i in answer.items if i.explanation for r in i.explanation.rules}
    assert rules & {"frustrated_high_confidence", "frustrated_less_exploration"}


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


async def test_a_segment_fill_records_the_device_that_feedback_is_learned_under(
    origin: httpx.AsyncClient, redis: Redis
) -> None:
    response = await origin.post(
        "/v1/personalize", json=request("u-6"), headers={FILL_SCOPE_HEADER: SEGMENT_SCOPE}
    )
    assert response.status_code == 200
    await feedback(origin, "u-6", {"item_id": "it-000009", "action": "click"})
    posteriors, _ = await PosteriorStore(redis, BanditConfig()).read(
        "desktop_evening", ["it-000009"]
    )
    assert bool(posteriors.observed[0]) is True
