"""Building the JSON answers that edge and origin send alike."""

from __future__ import annotations

import time
from typing import Any

import orjson
from pydantic import BaseModel
from starlette.responses import Response


def json_response(
    body: BaseModel, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        body.model_dump_json(), status_code=status, media_type="application/json", headers=headers
    )


def readiness_response(ready: bool, checks: dict[str, Any], **extra: Any) -> Response:
    """``/readyz``: 200 with the checks when ready, 503 with them when not."""
    body = {"status": "ready" if ready else "not_ready", **extra, "checks": checks}
    return Response(
        orjson.dumps(body), status_code=200 if ready else 503, media_type="application/json"
    )


def elapsed_ms(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter()`` reading), for latency_ms."""
    return round((time.perf_counter() - started) * 1000, 3)
