"""``/healthz``, ``/readyz``, ``/dependencies``: what an origin depends on and whether each
answers now (``web.health``).

An origin is ready once it has started with its catalog in memory: with Redis down it
still answers personalize (popular items, degraded) and refuses feedback with a 503 the
edges pass on; every origin shares that Redis, so taking them out of rotation would only
turn degraded answers into none. The dependencies are reported at ``GET /dependencies``
and in ``/metrics`` (``perso_origin_dependency_up``):

- ``redis``: answers a PING within a second;
- ``vector_store``: Qdrant (a server, or local mode) answers; on a catalog replica, which
  opens none, ``catalog_origin`` instead: the catalog origin answers ``/readyz``, with the
  catalog this replica holds (its version and slot, and the items it serves);
- ``llm``: a model server is configured (without one, explanations are templates by
  design, not a failure), with each model's circuit state.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from redis.exceptions import RedisError
from starlette.responses import Response

from origin.llm.model import ModelSize
from origin.runtime import Origin
from web.health import (
    DEPENDENCIES_RESPONSES,
    READINESS_RESPONSES,
    Dependency,
    dependencies_response,
)
from web.responses import readiness_response

PING_TIMEOUT_S = 1.0
MODEL_SIZES: tuple[ModelSize, ...] = ("small", "large")

health_router = APIRouter()


async def check(origin: Origin) -> list[Dependency]:
    """The state of each dependency now."""
    try:
        redis_up = bool(await asyncio.wait_for(origin.redis.ping(), PING_TIMEOUT_S))
    except (RedisError, OSError, TimeoutError):
        redis_up = False
    gateway = origin.llm.gateway
    circuits = (
        {f"{size}_circuit": gateway.breaker_state(size).value for size in MODEL_SIZES}
        if gateway is not None
        else {}
    )
    return [
        Dependency("redis", redis_up),
        await catalog_dependency(origin),
        Dependency("llm", gateway is not None, {"configured": gateway is not None, **circuits}),
    ]


async def catalog_dependency(origin: Origin) -> Dependency:
    """Where the catalog comes from: the vector store, or a replica's catalog origin."""
    if origin.catalog_origin is not None:
        mark = origin.catalog_mark
        held = {"version": mark.version, "slot": mark.slot, "items": len(origin.index)}
        details = {"url": origin.catalog_origin.base_url, **held}
        return Dependency("catalog_origin", await origin.catalog_origin.ping(), details)
    assert origin.store is not None  # an origin without a catalog origin opened its store
    return Dependency("vector_store", await origin.store.ping())


@health_router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@health_router.get("/readyz", response_class=Response, responses=READINESS_RESPONSES)
async def readyz(request: Request) -> Response:
    """Ready once started with its catalog: an origin answers (degraded when Redis fails)
    whatever its dependencies do (above)."""
    origin: Origin = request.app.state.origin
    return readiness_response(True, {"catalog_items": len(origin.index)})


@health_router.get("/dependencies", response_class=Response, responses=DEPENDENCIES_RESPONSES)
async def dependencies_of(request: Request) -> Response:
    """Each dependency's state now (Redis, the vector store, the LLM tier); always 200."""
    origin: Origin = request.app.state.origin
    return dependencies_response(await check(origin))
