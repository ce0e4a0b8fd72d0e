from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from redis.asyncio import Redis

from config.settings import Settings
from origin.app import create_app
from tests.apps import serving
from tests.sample_catalogs import SampleCatalogs


@pytest.fixture(scope="session")
def sample_catalogs(tmp_path_factory: pytest.TempPathFactory) -> SampleCatalogs:
    return SampleCatalogs(tmp_path_factory.mktemp("sample-catalogs"))


@pytest.fixture
async def origin_settings(
    redis: Redis,
    redis_url: str,
    make_settings: Callable[..., Settings],
    sample_catalogs: SampleCatalogs,
) -> Settings:
    """Settings of an origin over the suite's Redis, with the 500-item sample catalog
    ingested (once per run, copied since: ``tests.sample_catalogs``)."""
    settings = make_settings(redis_url=redis_url, event_partitions=4)
    await sample_catalogs.install(settings, redis)
    return settings


@pytest.fixture
async def origin(origin_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(create_app(origin_settings), "http://origin") as client:
        yield client
