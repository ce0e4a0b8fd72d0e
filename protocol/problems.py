"""The error body every 4xx/5xx of edge and origin carries, and its FastAPI wiring.

``{"error": "invalid_request", "field": "constraints.count", "reason": "...", "errors": [...]}``
``field`` and ``reason`` name the first problem; ``errors`` lists all of them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from protocol.exceptions import ApiError

log = logging.getLogger(__name__)


def field_path(loc: Sequence[int | str]) -> str:
    """``("body", "feedback", 0, "action")`` -> ``"feedback[0].action"``."""
    parts = list(loc)
    if parts and parts[0] == "body":
        parts = parts[1:]
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "body"


_NOT_AN_OBJECT = {"model_attributes_type", "dict_type", "model_type"}


def validation_problems(errors: Sequence[Any]) -> list[dict[str, str]]:
    problems = []
    for err in errors:
        if err.get("type") == "json_invalid":
            detail = err.get("ctx", {}).get("error", err.get("msg", ""))
            problems.append({"field": "body", "reason": f"body is not valid JSON: {detail}"})
            continue
        if tuple(err.get("loc", ())) == ("body",) and err.get("type") in _NOT_AN_OBJECT:
            reason = "expected a JSON object, sent with content-type: application/json"
            problems.append({"field": "body", "reason": reason})
            continue
        problems.append(
            {"field": field_path(err.get("loc", ())), "reason": str(err.get("msg", "invalid"))}
        )
    return problems or [{"field": "body", "reason": "invalid request"}]


def error_body(
    error: str,
    reason: str,
    *,
    field: str | None = None,
    errors: list[dict[str, str]] | None = None,
) -> bytes:
    """The JSON of the error body above."""
    body: dict[str, Any] = {"error": error, "field": field, "reason": reason}
    if errors is not None:
        body["errors"] = errors
    return orjson.dumps(body)


def error_response(
    status: int,
    error: str,
    reason: str,
    *,
    field: str | None = None,
    errors: list[dict[str, str]] | None = None,
    retry_after_s: int | None = None,
) -> Response:
    headers = {"Retry-After": str(retry_after_s)} if retry_after_s is not None else None
    return Response(
        error_body(error, reason, field=field, errors=errors),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


async def _on_validation_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    problems = validation_problems(exc.errors())
    first = problems[0]
    return error_response(
        400, "invalid_request", first["reason"], field=first["field"], errors=problems
    )


async def _on_api_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(
        exc.status, exc.error, exc.reason, field=exc.field, retry_after_s=exc.retry_after_s
    )


async def _on_http_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return error_response(exc.status_code, code, str(exc.detail))


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    # A bug, not the caller's fault: log it whole, answer without internals.
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "internal error; it has been logged")


def install_error_handlers(app: FastAPI) -> None:
    """Make every error of ``app`` answer with the body above; validation errors are 400."""
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(ApiError, _on_api_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(Exception, _on_unexpected)
