"""Request bodies of bounded size, on every route of every service.

Without a limit a server takes whatever a client sends into memory before it can refuse
it. ``BodyLimit`` answers 413 (the house error body, naming ``body``) before reading a
byte when ``Content-Length`` announces too much, and while reading otherwise (a chunked
body), as soon as the bytes received pass the limit. The limit is per route
(``limit_for(path)``): the origin's catalog ingest takes batches far larger than any API
request. The edge's own POST routes (``edge.http.asgi``) apply the same rule without this
middleware; this one guards the FastAPI apps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from web.problems import error_body

TOO_LARGE = "payload_too_large"


class BodyTooLarge(HTTPException):
    """The body passed its route's limit while being read (raised from ``receive``): the
    app's handler of HTTP errors answers it with a 413 (``web.problems``)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, too_large_reason(limit))


def too_large_reason(limit: int) -> str:
    return f"request bodies are limited to {limit} bytes"


def declared_length(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    """The ``Content-Length`` a request announces, None without one (or an unreadable
    one, which the server refuses before the app sees it)."""
    for name, value in headers:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


async def send_too_large(send: Send, limit: int) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    body = error_body(TOO_LARGE, too_large_reason(limit), field="body")
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """ASGI middleware: 413 for a body over ``limit_for(path)`` bytes."""

    def __init__(self, app: ASGIApp, *, limit_for: Callable[[str], int]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = declared_length(scope["headers"])
        if declared is not None and declared > limit:
            await send_too_large(send, limit)
            return
        received = 0
        started = False

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited, tracking)
        except BodyTooLarge:
            # Raised where no handler of HTTP errors answers it (outside the app's routes).
            if started:
                raise
            await send_too_large(send, limit)
