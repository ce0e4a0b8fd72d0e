"""Fixtures shared by every test layer.

The suite starts one real ``redis-server`` (the project's own launcher, the same one
``perso up`` uses) on a free port for the whole session; each test that asks for ``redis``
gets a client on a flushed database. No test depends on a Redis running on the machine.

``--redis cluster`` runs the cluster tier instead: the tests marked ``cluster`` (the
others are deselected) against a real Redis Cluster the suite starts (``perso cluster``'s
launcher: three primaries, a replica each); ``redis_url`` is then the cluster's address and
``redis`` a cluster client.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from config.settings import Settings
from perso.redis_cluster import RedisCluster
from perso.redis_server import RedisServer
from redis_client.client import RedisClient, open_client
from tests.credentials import API_KEYS, IDENTITY_KEY
from tests.postgres import EmbeddedPostgres, PostgresUnavailable

# The fake model server (llm_server, llm) for every layer that talks to the LLM tier.
pytest_plugins = ["tests.llm_fixtures"]

_OUTSIDE_ENV = (
    "REDIS_URL",
    "QDRANT_URL",
    "QDRANT_API_KEY",
    "PG_DSN",
    "LLM_BASE_URL",
    "LLM_API_KEY",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--redis",
        choices=("node", "cluster"),
        default="node",
        help="run against one Redis node (all tests) or a Redis Cluster (tests marked cluster)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--redis") != "cluster":
        return
    kept = [item for item in items if item.get_closest_marker("cluster") is not None]
    deselected = [item for item in items if item.get_closest_marker("cluster") is None]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = kept


@pytest.fixture(scope="session", autouse=True)
def _clean_environment() -> Iterator[None]:
    """Tests build their settings explicitly; the developer's environment must not leak in."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("PERSO_") or k in _OUTSIDE_ENV}
    for key in saved:
        del os.environ[key]
    yield
    os.environ.update(saved)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"), persistent=False)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """The PostgreSQL of this run (``tests.postgres``): ``TEST_POSTGRES_DSN``, else a
    server of the suite's own, started on first use; the test is skipped, with the
    reason, when there is none."""
    given = os.environ.get("TEST_POSTGRES_DSN")
    if given == "off":
        pytest.skip("TEST_POSTGRES_DSN=off")
    if given:
        yield given
        return
    try:
        server = EmbeddedPostgres.start()
    except PostgresUnavailable as exc:
        pytest.skip(f"no PostgreSQL for the lock backend's tests: {exc}")
    yield server.dsn
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    with RedisCluster(tmp_path_factory.mktemp("redis-cluster")) as cluster:
        yield cluster


@pytest.fixture
def redis_url(request: pytest.FixtureRequest) -> str:
    """The Redis of this run: the session's node, or (``--redis cluster``) its cluster."""
    if request.config.getoption("--redis") == "cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        return cluster.url
    server: RedisServer = request.getfixturevalue("redis_server")
    return server.url


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[RedisClient]:
    client = await open_client(redis_url)
    await client.flushall()  # on a cluster: every primary
    yield client
    await client.aclose()


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., Settings]:
    """Settings for a test: small catalog, data under the test's tmp dir."""

    def make(**overrides: object) -> Settings:
        fields: dict[str, object] = {
            "data_dir": tmp_path / "data",
            "catalog_size": 500,
            "embedding_dim": 32,
            "identity_keys": IDENTITY_KEY,
            "api_keys": API_KEYS,
        }
        fields.update(overrides)
        return Settings(**fields)  # type: ignore[arg-type]

    return make
