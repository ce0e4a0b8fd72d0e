from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from redis.asyncio import Redis

from config.settings import Settings
from origin.app import create_app
from origin.catalog.ingest import ensure_sample_catalog
from tests.apps import serving


@pytest.fixture
async def origin_settings(
    redis: Redis, redis_url: str, make_settings: Callable[..., Settings]
) -> Settings:
    """Settings of an origin over the suite's Redis, with a 500-item catalog ingested."""
    settings = make_settings(redis_url=redis_url, event_partitions=4)
    await ensure_sample_catalog(settings, redis)
    return settings


@pytest.fixture
async def origin(origin_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(create_app(origin_settings), "http://origin") as client:
        yield client
