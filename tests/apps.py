"""Running the real ASGI apps in-process, lifespan included, for integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI

from edge.asgi import EdgeFront


@asynccontextmanager
async def serving(app: FastAPI | EdgeFront, base_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """Start ``app``'s lifespan and yield a client that talks to it without a socket."""
    inner = app.fastapi if isinstance(app, EdgeFront) else app
    async with (
        inner.router.lifespan_context(inner),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url) as client,
    ):
        yield client
