"""The edge's front door: a plain ASGI app for the API's POSTs, FastAPI for the rest.

``POST /v1/personalize``, ``POST /v1/feedback`` and ``POST /v1/explain`` are answered here
without a framework: read the body (413 beyond ``max_body_bytes``, before reading it when
``Content-Length`` says so), hand it to ``edge.serve.personalize``, ``edge.serve.feedback`` or
``edge.serve.explain``, send the answer. A cache hit then costs about what a bare ASGI app costs
plus the lookup. Another method on those paths is a 405 with ``Allow: POST``. The demo
token route (``edge.http.demo_tokens``), when the edge runs one, is served the same way; when
it does not, its path is unknown like any other. Only after those miss, the storefront's
files (``edge.http.static``: ``GET /``, ``GET /static/...``) are looked up, so the hit path
pays nothing for them. Everything else (health, readiness, metrics, the OpenAPI document,
the lifespan that builds the edge) goes to the FastAPI app, behind the same body limit
(``web.body_limit``); the internal routes (``/v1/internal/...``) only for callers
with the service token (``edge.http.access``), checked here before FastAPI reads anything.
Errors have the same body as everywhere else (``web.problems``); an unexpected
exception is logged and answered with a 500 body, never a traceback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI
from pydantic import SecretStr
from starlette.types import Receive, Scope, Send

from edge.http import openapi
from edge.http.access import check_service, is_internal
from edge.http.static import StaticSite
from edge.serve import explain, feedback, personalize
from edge.serve.answer import Answer, Route
from protocol.exceptions import ApiError
from web.body_limit import TOO_LARGE, BodyLimit, too_large_reason
from web.openapi import publish
from web.problems import error_body

log = logging.getLogger(__name__)


DEFAULT_MAX_BODY_BYTES = 64 * 1024

_ROUTES: dict[str, Route] = {
    "/v1/personalize": personalize.personalize,
    "/v1/feedback": feedback.feedback,
    "/v1/explain": explain.explain,
}


# The only method of the paths above (a 405's ``Allow``).
ALLOWED_METHODS = "POST"


class BodyTooLarge(Exception):
    pass


# The request headers these endpoints read; the rest are never decoded.
_ETAGS = "if-none-match"
_WANTED = {b"authorization", _ETAGS.encode(), b"content-length"}


def wanted_headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """The headers of ``_WANTED``, decoded (ASGI gives names in lower case)."""
    return {k.decode(): v.decode("latin-1") for k, v in raw if k in _WANTED}


def problem(
    status: int,
    error: str,
    reason: str,
    *,
    field: str | None = None,
    retry_after_s: int | None = None,
    errors: list[dict[str, str]] | None = None,
    allow: str | None = None,
) -> Answer:
    """``web.problems``'s error body, as an ``Answer``."""
    body = error_body(error, reason, field=field, errors=errors)
    headers = [("content-type", "application/json")]
    if retry_after_s is not None:
        headers.append(("retry-after", str(retry_after_s)))
    if allow is not None:
        headers.append(("allow", allow))
    return Answer(status, body, headers)


async def _send(send: Send, answer: Answer) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": answer.status,
            "headers": [(k.encode(), v.encode()) for k, v in answer.headers],
        }
    )
    await send({"type": "http.response.body", "body": answer.body})


async def read_body(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionResetError("client went away")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks) if len(chunks) != 1 else chunks[0]


class EdgeFront:
    """``create_app``'s result: what uvicorn serves."""

    def __init__(
        self,
        fastapi: FastAPI,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        service_token: SecretStr | None = None,
        routes: Mapping[str, Route] | None = None,
        site: StaticSite | None = None,
    ) -> None:
        """``routes``: POST routes served like the API's besides them (the demo token
        route, when on); ``site``: the storefront's files (None: none served)."""
        self.fastapi = fastapi
        self.max_body_bytes = max_body_bytes
        # Who may call the internal routes (None: nobody).
        self.service_token = service_token
        self._routes = dict(routes or {})
        self.site = site if site is not None else StaticSite({})
        # Every other route: FastAPI's, with the same limit on bodies.
        self._rest = BodyLimit(fastapi, limit_for=lambda _path: max_body_bytes)
        # FastAPI's document describes the routes served here too.
        publish(fastapi, lambda spec: openapi.complete(spec, extra=tuple(self._routes)))

    @property
    def state(self) -> Any:
        return self.fastapi.state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        # The API's routes first: a hit looks up nothing else.
        handler = _ROUTES.get(path) or self._routes.get(path)
        if handler is None:
            page = self.site.get(path)
            if page is not None:
                headers = wanted_headers(scope["headers"])
                await _send(send, self.site.answer(page, scope["method"], headers.get(_ETAGS)))
                return
            refused = self._refused(scope) if is_internal(path) else None
            if refused is None:
                await self._rest(scope, receive, send)
            else:
                await _send(send, refused)
            return
        if scope["method"] == "POST":
            started = time.perf_counter()
            try:
                answer = await self._answer(handler, wanted_headers(scope["headers"]), receive)
            except ConnectionResetError:
                return
            if handler is personalize.personalize:
                edge = self.fastapi.state.edge
                edge.counters.latency.observe((time.perf_counter() - started) * 1000)
        else:
            answer = problem(405, "method_not_allowed", "Method Not Allowed", allow=ALLOWED_METHODS)
        await _send(send, answer)

    def _refused(self, scope: Scope) -> Answer | None:
        """The 401 of an internal route's caller without the service token, else None."""
        try:
            check_service(wanted_headers(scope["headers"]).get("authorization"), self.service_token)
        except ApiError as exc:
            return problem(exc.status, exc.error, exc.reason, field=exc.field)
        return None

    def _too_large(self) -> Answer:
        return problem(413, TOO_LARGE, too_large_reason(self.max_body_bytes), field="body")

    async def _answer(
        self,
        handler: Route,
        headers: Mapping[str, str],
        receive: Receive,
    ) -> Answer:
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            return self._too_large()
        try:
            raw = await read_body(receive, self.max_body_bytes)
        except BodyTooLarge:
            return self._too_large()
        try:
            return await handler(self.fastapi.state.edge, headers, raw)
        except ApiError as exc:
            return problem(
                exc.status,
                exc.error,
                exc.reason,
                field=exc.field,
                retry_after_s=exc.retry_after_s,
                errors=exc.errors,
            )
        except Exception:
            log.exception("unhandled error on the edge")
            return problem(500, "internal_error", "internal error; it has been logged")
