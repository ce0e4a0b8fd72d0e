"""The servers ``benchmarks.edge_hit`` compares the edge with: one captured edge answer,
sent back for every POST by a minimal raw ASGI app, or by a FastAPI endpoint.

Both read the request body (as the edge does) and send the captured status, headers and
body bytes unchanged. They are served by ``perso.cli._serve``, the very uvicorn set-up the
edge runs under (uvloop, httptools, access log off, lifespan on), so the only difference
from the edge is the work each app does per request.

Run (edge_hit starts it): ``python -m benchmarks.raw_asgi {raw,fastapi} ANSWER.json PORT``
where ANSWER.json is ``{"status": 200, "headers": [[name, value], ...], "body_b64": ...}``.
"""

from __future__ import annotations

import argparse
import base64
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from starlette.responses import Response

from config.settings import Settings
from perso.cli import _serve

Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@dataclass(frozen=True)
class CapturedAnswer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "headers": [list(pair) for pair in self.headers],
            "body_b64": base64.b64encode(self.body).decode("ascii"),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CapturedAnswer:
        headers = [(str(name), str(value)) for name, value in data["headers"]]
        return cls(int(data["status"]), headers, base64.b64decode(data["body_b64"]))


class RawApp:
    """The smallest ASGI app that reads a request and answers it: no routing at all."""

    def __init__(self, answer: CapturedAnswer) -> None:
        self._start = {
            "type": "http.response.start",
            "status": answer.status,
            "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers],
        }
        self._body = {"type": "http.response.body", "body": answer.body}

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body", False):
            pass
        await send(self._start)
        await send(self._body)


def fastapi_app(answer: CapturedAnswer) -> FastAPI:
    """The same answer from a FastAPI route (the framework's routing, request and response
    objects; no validation model, so it measures the framework and not pydantic)."""
    app = FastAPI()
    headers = {k: v for k, v in answer.headers if k.lower() != "content-type"}
    media_type = dict((k.lower(), v) for k, v in answer.headers).get("content-type")

    @app.post("/v1/personalize")
    async def personalize(request: Request) -> Response:
        await request.body()
        return Response(answer.body, answer.status, headers, media_type=media_type)

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("app", choices=["raw", "fastapi"])
    parser.add_argument("answer", type=Path, help="the captured answer (JSON)")
    parser.add_argument("port", type=int)
    args = parser.parse_args()
    answer = CapturedAnswer.from_json(json.loads(args.answer.read_text()))
    app = RawApp(answer) if args.app == "raw" else fastapi_app(answer)
    raise SystemExit(_serve(app, Settings(host="127.0.0.1", log_level="warning"), args.port))


if __name__ == "__main__":
    main()
