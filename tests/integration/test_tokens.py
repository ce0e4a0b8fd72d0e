"""``POST /v1/auth/token`` on the real origin app: API keys, tiers, segments, expiry."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from redis.asyncio import Redis

from config.settings import ConfigError, Settings
from origin.app import create_app
from protocol.identity import verify
from protocol.segments import Segment
from tests.apps import serving
from tests.credentials import API_SECRETS, IDENTITY_KEY

KEYS = [IDENTITY_KEY.encode()]


async def token_for(
    origin: httpx.AsyncClient, user_id: str, secret: str | None, **extra: object
) -> httpx.Response:
    headers = {"x-api-key": secret} if secret is not None else {}
    return await origin.post("/v1/auth/token", json={"user_id": user_id, **extra}, headers=headers)


@pytest.mark.parametrize("tier", ["premium", "standard", "free"])
async def test_a_token_carries_the_user_and_the_tier_of_the_key(
    origin: httpx.AsyncClient, tier: str
) -> None:
    response = await token_for(origin, "u-tok", API_SECRETS[tier])
    assert response.status_code == 200, response.text
    body = response.json()
    claims = verify(body["token"], KEYS, now_s=time.time())
    assert (claims.user_id, claims.tier, claims.api_key) == ("u-tok", tier, f"{tier}-shop")
    assert claims.segment is Segment.NEW
    assert body["token_type"] == "Bearer"
    assert 3500 < claims.expires_at - time.time() <= 3600


async def test_the_segment_comes_from_recorded_feedback(origin: httpx.AsyncClient) -> None:
    headers = {"content-type": "application/json"}
    for n in range(3):
        body = {"user_id": "u-seg", "feedback": [{"item_id": f"it-{n}", "action": "click"}]}
        assert (await origin.post("/v1/feedback", json=body, headers=headers)).status_code == 200
    response = await token_for(origin, "u-seg", API_SECRETS["free"])
    claims = verify(response.json()["token"], KEYS, now_s=time.time())
    assert claims.segment is Segment.ACTIVE


async def test_a_shorter_lifetime_may_be_asked(origin: httpx.AsyncClient) -> None:
    response = await token_for(origin, "u", API_SECRETS["free"], ttl_s=120)
    claims = verify(response.json()["token"], KEYS, now_s=time.time())
    assert claims.expires_at - claims.issued_at == 120


@pytest.mark.parametrize(
    ("secret", "body", "status", "field"),
    [
        (None, {"user_id": "u"}, 401, "x-api-key"),
        ("wrong-secret-0123456789", {"user_id": "u"}, 401, "x-api-key"),
        (API_SECRETS["free"], {"user_id": "bad id!"}, 400, "user_id"),
        (API_SECRETS["free"], {"user_id": "u", "ttl_s": 5}, 400, "ttl_s"),
        (API_SECRETS["free"], {"user_id": "u", "role": "admin"}, 400, "role"),
    ],
)
async def test_refused(
    origin: httpx.AsyncClient, secret: str | None, body: dict[str, object], status: int, field: str
) -> None:
    headers = {"x-api-key": secret} if secret is not None else {}
    response = await origin.post("/v1/auth/token", json=body, headers=headers)
    assert response.status_code == status, response.text
    assert field in response.text


@pytest.fixture
async def keyless_origin(
    origin_settings: Settings,
) -> AsyncIterator[httpx.AsyncClient]:
    settings = origin_settings.model_copy(update={"identity_keys": None})
    async with serving(create_app(settings), "http://origin") as client:
        yield client


async def test_without_identity_keys_no_token_is_issued(
    keyless_origin: httpx.AsyncClient,
) -> None:
    response = await token_for(keyless_origin, "u", API_SECRETS["free"])
    assert response.status_code == 503
    assert "PERSO_IDENTITY_KEYS" in response.text


def test_a_bad_api_key_list_stops_the_origin(
    redis: Redis, make_settings: Callable[..., Settings], redis_url: str
) -> None:
    with pytest.raises(ConfigError, match="PERSO_API_KEYS: entry 1"):
        create_app(make_settings(redis_url=redis_url, api_keys="nonsense"))
