"""Running the real ASGI apps in-process, lifespan included, for integration tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI

from edge.http.asgi import EdgeFront


@asynccontextmanager
async def serving(app: FastAPI | EdgeFront, base_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """Start ``app``'s lifespan and yield a client that talks to it without a socket."""
    inner = app.fastapi if isinstance(app, EdgeFront) else app
    async with (
        inner.router.lifespan_context(inner),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url) as client,
    ):
        yield client


@asynccontextmanager
async def listening(app: FastAPI | EdgeFront, port: int) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn on ``127.0.0.1:port`` in this event loop, lifespan
    included (a real HTTP server, for what must be reached over the network); yields its
    base URL, and stops it on the way out."""
    import uvicorn  # noqa: PLC0415

    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, lifespan="on", log_level="warning", access_log=False
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        for _ in range(600):
            if server.started or task.done():
                break
            await asyncio.sleep(0.05)
        if not server.started:
            await task  # raises what stopped it
            raise RuntimeError(f"uvicorn did not start on port {port}")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
