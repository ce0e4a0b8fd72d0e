"""The origin on each lock backend of ``PERSO_LOCK_BACKEND``: a model deployment and a
preference change go through the configured lock (Redlock: three real Redis servers of
their own; PostgreSQL: when one is reachable, as in ``tests/postgres.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from pydantic import SecretStr
from redis.asyncio import Redis

from config.settings import Settings
from coordination.postgres_lock import PostgresLock
from coordination.redis_lock import RedisLock
from coordination.redlock import Redlock
from origin.app import Origin, create_app
from origin.catalog.ingest import ensure_sample_catalog
from perso.redis_server import RedisServer
from tests.apps import serving

TOKEN = "lock-backends-admin-token"


@pytest.fixture(scope="module")
def redlock_urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ...]]:
    servers = [
        RedisServer(tmp_path_factory.mktemp(f"redlock-{i}"), persistent=False) for i in range(3)
    ]
    for server in servers:
        server.start()
    yield tuple(server.url for server in servers)
    for server in servers:
        server.stop()


@pytest.mark.parametrize("backend", ["redis", "redlock", "postgres"])
async def test_the_origin_coordinates_through_the_configured_backend(
    backend: str,
    redis: Redis,
    redis_url: str,
    make_settings: Callable[..., Settings],
    request: pytest.FixtureRequest,
) -> None:
    lock_settings: dict[str, object] = {"lock_backend": backend}
    if backend == "redlock":
        lock_settings["lock_redlock_urls"] = request.getfixturevalue("redlock_urls")
    if backend == "postgres":
        lock_settings["pg_dsn"] = SecretStr(request.getfixturevalue("postgres_dsn"))
    settings = make_settings(
        redis_url=redis_url,
        event_partitions=2,
        admin_token=TOKEN,
        text_encoder="hashing",
        catalog_size=100,
        **lock_settings,
    )
    await ensure_sample_catalog(settings, redis)
    app = create_app(settings)
    async with serving(app, "http://origin") as client:
        origin: Origin = app.state.origin
        inner = origin.lock.inner
        expected = {"redis": RedisLock, "redlock": Redlock, "postgres": PostgresLock}[backend]
        assert isinstance(inner, expected)

        admin = {"authorization": f"Bearer {TOKEN}"}
        first = await client.post(
            "/v1/admin/model-epoch", json={"model_version": "nn-2"}, headers=admin
        )
        second = await client.post(
            "/v1/admin/model-epoch", json={"model_version": "nn-3"}, headers=admin
        )
        assert (first.status_code, second.status_code) == (200, 200), first.text
        assert (first.json()["epoch"], second.json()["epoch"]) == (1, 2)

        category = origin.index.items[0].category
        change = await client.post(
            "/v1/preferences",
            json={"user_id": "u-1", "category": category, "direction": "positive", "strength": 0.5},
        )
        assert change.status_code == 200, change.text
        assert origin.lock.stats.grants == 3
        assert origin.lock.stats.lost == 0
        assert not origin.lock.held
        status = (await client.get("/v1/admin/locks/model-deployment", headers=admin)).json()
        assert status == {"resource": "model-deployment", "held": False}
