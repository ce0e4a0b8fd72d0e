"""``GET /v1/internal/users/{user_id}/state``: what an edge needs to rank for a user, read
from the workers' record and the stated preferences, against the suite's Redis."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import pytest
from redis.asyncio import Redis

from config.settings import Settings
from origin.app import create_app
from origin.catalog.ingest import ensure_sample_catalog
from origin.learned.user_models import UserRecord, encode_record
from perso.redis_server import RedisServer
from protocol import keys
from protocol.user_model_wire import STATE_MEDIA_TYPE, decode_user_model
from relevance.user_model import UserModel, model_from_bytes
from tests.apps import serving


async def state_of(origin: httpx.AsyncClient, user_id: str) -> httpx.Response:
    return await origin.get(f"/v1/internal/users/{user_id}/state")


async def test_a_users_model_and_preferences(
    origin: httpx.AsyncClient, origin_settings: Settings, redis: Redis
) -> None:
    dim = origin_settings.embedding_dim
    model = UserModel(np.linspace(-1, 1, dim).astype(np.float32), np.full(dim, 0.05, np.float32))
    await redis.set(keys.user_record("ann"), encode_record(UserRecord(version=9, model=model), dim))
    answer = await origin.post(
        "/v1/preferences",
        json={"user_id": "ann", "category": "books", "direction": "negative", "strength": 1},
    )
    assert answer.status_code == 200, answer.text
    response = await state_of(origin, "ann")
    assert response.status_code == 200
    assert response.headers["content-type"] == STATE_MEDIA_TYPE
    state = decode_user_model(response.content)
    assert (state.user_id, state.version) == ("ann", 9)
    assert state.preferences == {"books": -1.0}
    assert state.preferences_version > 0  # the write's fencing token
    first = state.preferences_version
    again = await origin.post(
        "/v1/preferences",
        json={
            "user_id": "ann",
            "category": "electronics",
            "direction": "positive",
            "strength": 0.5,
        },
    )
    assert again.status_code == 200, again.text
    later = decode_user_model((await state_of(origin, "ann")).content)
    assert later.preferences == {"books": -1.0, "electronics": 0.5}
    assert later.preferences_version > first  # a change is always a newer version
    assert state.model is not None
    back = model_from_bytes(state.model, dim)
    assert back.mean.tolist() == pytest.approx(model.mean.tolist(), abs=1e-3)


async def test_a_user_nobody_wrote_has_version_zero_and_no_model(
    origin: httpx.AsyncClient,
) -> None:
    response = await state_of(origin, "nobody")
    assert response.status_code == 200
    state = decode_user_model(response.content)
    assert (state.version, state.model, dict(state.preferences)) == (0, None, {})
    assert state.preferences_version == 0


async def test_without_redis_a_503_not_a_guess(
    tmp_path: Path, make_settings: Callable[..., Settings]
) -> None:
    server = RedisServer(tmp_path / "own-redis", persistent=False).start()
    try:
        settings = make_settings(redis_url=server.url)
        client = Redis.from_url(server.url)
        await ensure_sample_catalog(settings, client)
        await client.aclose()
        async with serving(create_app(settings), "http://origin") as origin:
            server.stop()
            response = await state_of(origin, "ann")
            assert response.status_code == 503
            assert response.json()["error"] == "unavailable"
            assert response.headers["retry-after"] == "1"
    finally:
        server.stop()
