"""Issue 15's holes, each reproduced against an edge in front of the real origin app (both
in-process, over the suite's Redis): a cross-user leak, a cache-key collision, one user
opening the circuit for everyone, and a client busting the cache."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
import pytest

from config.settings import Settings
from edge.app import create_app as create_edge
from edge.node import Edge
from origin.app import create_app as create_origin
from protocol.api import PersonalizeResponse
from protocol.segments import Segment
from resilience.circuit_breaker import State
from tests.apps import serving
from tests.credentials import bearer, user_token
from tests.fakes import FakeClock


@dataclass
class Deployment:
    edge_client: httpx.AsyncClient
    origin_client: httpx.AsyncClient
    edge: Edge
    clock: FakeClock

    def auth(self, user_id: str, segment: Segment = Segment.NEW) -> dict[str, str]:
        return bearer(user_token(user_id, now_s=self.clock(), segment=segment))

    async def personalize(
        self, user_id: str, segment: Segment = Segment.NEW, **parts: Any
    ) -> PersonalizeResponse:
        response = await self.edge_client.post(
            "/v1/personalize", json=home(user_id, **parts), headers=self.auth(user_id, segment)
        )
        assert response.status_code == 200, response.text
        return PersonalizeResponse.model_validate_json(response.content)


def home(user_id: str, **parts: Any) -> dict[str, Any]:
    context = {"page_type": "home", "device": "mobile", "geo": {"country": "DE"}}
    return {"user_id": user_id, "context": context, **parts}


@pytest.fixture
async def deployment(origin_settings: Settings) -> AsyncIterator[Deployment]:
    clock = FakeClock()
    origin_app = create_origin(origin_settings, rng=np.random.default_rng(7), clock=clock)
    edge_app = create_edge(
        origin_settings,
        region="eu-west",
        clock=clock,
        origin_transport=httpx.ASGITransport(app=origin_app),
    )
    async with (
        serving(origin_app, "http://origin") as origin_client,
        serving(edge_app, "http://edge") as edge_client,
    ):
        yield Deployment(edge_client, origin_client, edge_app.state.edge, clock)


async def items_of(origin: httpx.AsyncClient, category: str, count: int) -> list[str]:
    answer = await origin.post(
        "/v1/personalize",
        json=home("catalog-reader", constraints={"count": count, "categories": [category]}),
        headers={"x-perso-fill-scope": "segment"},
    )
    assert answer.status_code == 200, answer.text
    return [item["item_id"] for item in answer.json()["items"]]


async def test_a_power_users_ranking_never_reaches_another_user(
    deployment: Deployment,
) -> None:
    """Issue 15 item 1: two power users whose feedback the edge never saw (it went to the
    origin: another edge, another process, before a restart) ask for the same page; the
    second got a HIT with the first one's exact items and "Recommended because you've
    shown interest in Electronics"."""
    origin = deployment.origin_client
    for user, category in (("user-a", "electronics"), ("user-b", "furniture")):
        clicks = [
            {"item_id": item, "action": "click"} for item in await items_of(origin, category, 12)
        ]
        accepted = await origin.post("/v1/feedback", json={"user_id": user, "feedback": clicks})
        assert accepted.status_code == 200, accepted.text

    explain = {"options": {"include_explanation": True}}
    a = await deployment.personalize("user-a", Segment.POWER, **explain)
    b = await deployment.personalize("user-b", Segment.POWER, **explain)
    assert not b.metadata.cache_hit, "user-b was served from user-a's entry"
    assert [i.item_id for i in b.items] != [i.item_id for i in a.items]
    reasons_b = " ".join(i.explanation.primary_reason for i in b.items if i.explanation)
    assert "interest in Electronics" not in reasons_b
    # Each is still served their own answer from the cache afterwards.
    again = await deployment.personalize("user-a", Segment.POWER, **explain)
    assert again.metadata.cache_hit
    assert [i.item_id for i in again.items] == [i.item_id for i in a.items]


async def test_a_comma_in_a_category_does_not_poison_the_real_categories(
    deployment: Deployment,
) -> None:
    """Issue 15 item 2: ``["computers,electronics"]`` (no such category: 0 items) was
    stored under the key of ``["computers", "electronics"]``."""
    poisoned = await deployment.personalize(
        "attacker", constraints={"categories": ["computers,electronics"]}
    )
    assert poisoned.items == []
    victim = await deployment.personalize(
        "victim", constraints={"categories": ["computers", "electronics"]}
    )
    assert not victim.metadata.cache_hit
    assert len(victim.items) == 20
    assert {i.metadata.category for i in victim.items} <= {"Computers", "Electronics"}


@pytest.mark.parametrize(
    "timestamp", ["0001-01-01T00:00:00+23:59", "9999-12-31T23:59:59Z", "2000-01-01T00:00:00Z"]
)
async def test_one_users_timestamps_neither_fail_nor_open_the_circuit(
    deployment: Deployment, timestamp: str
) -> None:
    """Issue 15 item 3: such a timestamp raised in the origin's local-time computation (a
    500 and a dropped connection); retried, three of them opened the edge's breaker and
    every user's feedback got 503 for 5 s."""
    bad = {
        "user_id": "mallory",
        "feedback": [{"item_id": "it-000001", "action": "click", "timestamp": timestamp}],
    }
    for _ in range(6):
        answer = await deployment.edge_client.post(
            "/v1/feedback", json=bad, headers=deployment.auth("mallory")
        )
        assert answer.status_code == 400
        assert answer.json()["field"] == "feedback[0].timestamp"
    # The origin refuses it too, with the same 400, should a client reach it directly.
    direct = await deployment.origin_client.post("/v1/feedback", json=bad)
    assert (direct.status_code, direct.json()["field"]) == (400, "feedback[0].timestamp")
    assert deployment.edge.origin.breaker.state is State.CLOSED
    victim = {"user_id": "victim", "feedback": [{"item_id": "it-000001", "action": "click"}]}
    answer = await deployment.edge_client.post(
        "/v1/feedback", json=victim, headers=deployment.auth("victim")
    )
    assert answer.status_code == 200, answer.text


async def test_varying_exploration_rate_does_not_force_a_fill_per_request(
    deployment: Deployment,
) -> None:
    """Issue 15 item 8: 50 requests with 50 different rates were 50 origin fills."""
    edge = deployment.edge
    answers = [
        await deployment.personalize("buster", options={"exploration_rate": 0.2 + n / 1000})
        for n in range(50)
    ]
    # 0.200 .. 0.249: the buckets 0.20 and 0.25.
    assert edge.counters.misses == 2
    assert sum(a.metadata.cache_hit for a in answers) == 48


async def test_a_user_missing_on_purpose_is_limited_and_others_are_not(
    deployment: Deployment,
) -> None:
    """Each miss costs the origin a ranking: a user varying a filter on every request gets
    their tier's fill rate (premium: a burst of 30, then 2 per second), then what the edge
    has (degraded, rate_limited) instead of a fill per request."""
    edge = deployment.edge
    limited = []
    for n in range(40):
        answer = await deployment.personalize(
            "buster", constraints={"price_range": {"max": 100 + n}}
        )
        if answer.metadata.rate_limited:
            limited.append(answer)
    assert edge.counters.misses == 30
    assert len(limited) == 10
    assert all(a.metadata.degraded for a in limited)
    # Another user is not affected.
    other = await deployment.personalize("bystander", constraints={"price_range": {"max": 7}})
    assert not other.metadata.rate_limited
    # And the budget comes back with time.
    deployment.clock.tick(1.0)
    answer = await deployment.personalize("buster", constraints={"price_range": {"max": 1}})
    assert not answer.metadata.rate_limited
