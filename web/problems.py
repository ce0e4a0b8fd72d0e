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
from starlette.routing import Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from protocol.exceptions import ApiError

log = logging.getLogger(__name__)


# Where FastAPI found a value, left out of the field's name: bodies, path parameters and
# headers name their fields unambiguously (a query parameter keeps its ``query.``).
_NAMED_ALONE = frozenset({"body", "path", "header"})


def field_path(loc: Sequence[int | str]) -> str:
    """``("body", "feedback", 0, "action")`` -> ``"feedback[0].action"``; a path
    parameter or a header by its name alone (``("header", "idempotency-key")``)."""
    parts = list(loc)
    if parts and parts[0] in _NAMED_ALONE:
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
        # the whole body: ("body",) from FastAPI, () from a model's own validate_json
        if tuple(err.get("loc", ())) in ((), ("body",)) and err.get("type") in _NOT_AN_OBJECT:
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
        exc.status,
        exc.error,
        exc.reason,
        field=exc.field,
        errors=exc.errors,
        retry_after_s=exc.retry_after_s,
    )


# The router's and the body limit's own errors: their code, and the field they are about.
_HTTP_ERRORS: dict[int, tuple[str, str | None]] = {
    404: ("not_found", None),
    405: ("method_not_allowed", None),
    413: ("payload_too_large", "body"),
}


async def _on_http_error(request: Request, exc: Exception) -> Response:
    """An error the framework raised: our body, its headers kept; a 405's ``Allow`` names
    every method of the path (Starlette names those of the first route it matched, so a
    path with a GET route and a DELETE route said only ``GET``)."""
    assert isinstance(exc, StarletteHTTPException)
    code, field = _HTTP_ERRORS.get(exc.status_code, ("http_error", None))
    response = error_response(exc.status_code, code, str(exc.detail), field=field)
    response.headers.update(exc.headers or {})
    if exc.status_code == 405:
        response.headers["Allow"] = ", ".join(allowed_methods(request.app.router, request.scope))
    return response


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(router: Router, scope: Scope) -> list[str]:
    """The methods some route of ``router`` answers on ``scope``'s path."""
    return [
        method
        for method in _METHODS
        if any(
            route.matches({**scope, "method": method})[0] is Match.FULL for route in router.routes
        )
    ]


INTERNAL_ERROR = error_body("internal_error", "internal error; it has been logged")


class AnswerUnexpected:
    """An unexpected exception (a bug that one request's content triggered) becomes a 500
    with the body above, and the connection stays open.

    Starlette's own handler for ``Exception`` sends its answer and then raises again, for
    the server to log; uvicorn then closes the connection, and a client that keeps
    connections alive (every edge) pays a reconnect for one bad request. This middleware
    sits inside that one, logs the error whole and ends the exchange here.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except Exception as exc:
            log.error(
                "unhandled error on %s %s", scope.get("method"), scope.get("path"), exc_info=exc
            )
            if started:
                return  # too late for an error answer; the client sees a short body
            await send(
                {
                    "type": "http.response.start",
                    "status": 500,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": INTERNAL_ERROR})


def install_error_handlers(app: FastAPI) -> None:
    """Make every error of ``app`` answer with the body above; validation errors are 400,
    an unexpected exception a 500 that keeps the connection."""
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(ApiError, _on_api_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_middleware(AnswerUnexpected)
