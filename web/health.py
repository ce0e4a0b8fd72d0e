"""Health, readiness and dependencies: the three questions every process answers.

- ``/healthz``: the process is alive (200, or no answer at all).
- ``/readyz``: it can answer its requests now, so a load balancer may send it traffic. A
  process that can still answer (degraded, from what it holds) when a dependency fails is
  ready: pulling it then would take out every copy exactly when they matter.
- ``/dependencies``: each dependency and whether it answered just now, for operators;
  always 200 (the body says what is up), and the same figures in ``/metrics`` as
  ``perso_<process>_dependency_up{dependency=...}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import BaseModel
from starlette.responses import Response


@dataclass(frozen=True, slots=True)
class Dependency:
    name: str
    up: bool
    detail: dict[str, Any] = field(default_factory=dict)


class Readiness(BaseModel):
    """``/readyz``'s body (200 when ready, 503 when not)."""

    status: Literal["ready", "not_ready"]
    region: str | None = None  # an edge's
    checks: dict[str, Any]


class DependencyState(BaseModel):
    up: bool


class Dependencies(BaseModel):
    """``/dependencies``' body: each dependency's ``up`` and what else it says of itself."""

    region: str | None = None  # an edge's
    dependencies: dict[str, DependencyState]


# The responses of the three routes, for their decorators.
READINESS_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": Readiness, "description": "Ready"},
    503: {"model": Readiness, "description": "Not ready: the checks say why"},
}
DEPENDENCIES_RESPONSES: dict[int | str, dict[str, Any]] = {200: {"model": Dependencies}}
METRICS_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The Prometheus text format",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
}


def dependencies_response(dependencies: Sequence[Dependency], **extra: Any) -> Response:
    """``/dependencies``: ``{..extra, "dependencies": {name: {"up": ..., ..detail}}}``."""
    body = {**extra, "dependencies": {d.name: {"up": d.up, **d.detail} for d in dependencies}}
    return Response(orjson.dumps(body), media_type="application/json")
