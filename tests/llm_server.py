"""A small OpenAI-compatible model server standing in for vLLM in tests and benchmarks.

Run as its own process: ``python -m tests.llm_server --port N``. ``POST
/v1/chat/completions`` answers in the OpenAI shape with a valid explanation JSON about the
item quoted in the user message, with usage figures, and says how long it took in the
``x-server-time-ms`` header (the benchmark subtracts it to find our overhead).

How it misbehaves is set with ``POST /control``; every field is optional and the body
replaces the whole configuration (absent fields take their defaults)::

    {"mode": "good" | "slow" | "invalid_json" | "length" | "rate_limited" | "down" | "hang",
     "delay_ms": [min, max],     # every answer waits uniform(min, max) first; default [0, 0]
     "tail_share": 0.0,          # this share of answers waits uniform(tail_ms) instead
     "tail_ms": [min, max],      # the slow answers' wait (a real endpoint's tail)
     "slow_ms": 1000,            # how long "slow" waits before a good answer
     "invalid_times": 0,         # the next n answers are invalid JSON, then as the mode says
     "retry_after_s": 1,         # Retry-After of a 429 (null: no header)
     "down_models": [],          # these models answer 503 whatever the mode
     "reset_stats": false}

``length`` answers a good explanation marked ``finish_reason: "length"`` (as if cut at
``max_tokens``, though it parses); ``down`` answers 503; ``hang`` never answers. ``GET
/stats`` counts requests by model, by status and with a bearer token, and lists the
``x-server-time-ms`` of the last completions in the order they were answered
(``server_ms``); ``GET /health`` and ``GET /v1/models`` answer 200.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

MODES = ("good", "slow", "invalid_json", "length", "rate_limited", "down", "hang")
SERVER_TIMES_KEPT = 100_000  # bounded: a long benchmark must not grow the server without end
_QUOTED = re.compile(r'"([^"\n]{1,200})"')


@dataclass
class Config:
    mode: str = "good"
    delay_ms: tuple[float, float] = (0.0, 0.0)
    tail_share: float = 0.0
    tail_ms: tuple[float, float] = (0.0, 0.0)
    slow_ms: float = 1000.0
    invalid_times: int = 0
    retry_after_s: float | None = 1.0
    down_models: frozenset[str] = frozenset()

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Config:
        unknown = set(body) - {*cls.__dataclass_fields__, "reset_stats"}
        if unknown:
            raise ValueError(f"unknown fields {sorted(unknown)}")
        mode = body.get("mode", "good")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        low, high = (float(x) for x in body.get("delay_ms", (0, 0)))
        if not 0 <= low <= high:
            raise ValueError("delay_ms must be [min, max] with 0 <= min <= max")
        tail_low, tail_high = (float(x) for x in body.get("tail_ms", (0, 0)))
        tail_share = float(body.get("tail_share", 0.0))
        if not 0 <= tail_low <= tail_high or not 0 <= tail_share <= 1:
            raise ValueError("tail_ms must be [min, max], 0 <= min <= max; tail_share in [0, 1]")
        retry_after = body.get("retry_after_s", 1.0)
        return cls(
            mode=mode,
            delay_ms=(low, high),
            tail_share=tail_share,
            tail_ms=(tail_low, tail_high),
            slow_ms=float(body.get("slow_ms", 1000.0)),
            invalid_times=int(body.get("invalid_times", 0)),
            retry_after_s=None if retry_after is None else float(retry_after),
            down_models=frozenset(body.get("down_models", ())),
        )


@dataclass
class State:
    config: Config = field(default_factory=Config)
    requests: int = 0
    by_model: Counter[str] = field(default_factory=Counter)
    by_status: Counter[str] = field(default_factory=Counter)
    with_bearer: int = 0  # requests that came with an Authorization: Bearer header
    server_ms: deque[float] = field(default_factory=lambda: deque(maxlen=SERVER_TIMES_KEPT))
    # Bumped by a reset: a slow answer to a request from before it is not counted after it.
    generation: int = 0
    rng: random.Random = field(default_factory=random.Random)

    def reset_stats(self) -> None:
        self.requests = 0
        self.by_model.clear()
        self.by_status.clear()
        self.with_bearer = 0
        self.server_ms.clear()
        self.generation += 1


def explanation_for(user_message: str) -> dict[str, Any]:
    match = _QUOTED.search(user_message)
    item = match.group(1) if match else "this item"
    return {
        "headline": f"{item} matches what you have been looking at.",
        "detailed": (
            f"{item} is close to the items you viewed recently and popular with shoppers "
            "like you. It fits the price range you usually choose."
        ),
        "factors": [
            {"name": "category_match", "weight": 0.8, "description": "Matches your interests"},
            {"name": "popularity", "weight": 0.5, "description": "Popular with similar users"},
        ],
    }


def completion_body(
    model: str, content: str, prompt_chars: int, finish_reason: str = "stop"
) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": max(1, prompt_chars // 4),
            "completion_tokens": max(1, len(content) // 4),
            "total_tokens": max(1, prompt_chars // 4) + max(1, len(content) // 4),
        },
    }


def build_app(state: State | None = None) -> Starlette:
    state = state if state is not None else State()

    def timed(started: float, generation: int, response: Response) -> Response:
        server_ms = (time.perf_counter() - started) * 1000
        response.headers["x-server-time-ms"] = f"{server_ms:.3f}"
        if generation == state.generation:
            state.by_status[str(response.status_code)] += 1
            state.server_ms.append(server_ms)
        return response

    async def completions(request: Request) -> Response:
        started = time.perf_counter()
        generation = state.generation
        body = await request.json()
        model = str(body.get("model", ""))
        messages = body.get("messages", [])
        state.requests += 1
        state.by_model[model] += 1
        state.with_bearer += request.headers.get("authorization", "").startswith("Bearer ")
        config = state.config
        low, high = config.delay_ms
        if config.tail_share and state.rng.random() < config.tail_share:
            low, high = config.tail_ms
        if high > 0:
            await asyncio.sleep(state.rng.uniform(low, high) / 1000)
        if config.mode == "hang":
            await asyncio.Event().wait()
        if model in config.down_models or config.mode == "down":
            return timed(
                started, generation, JSONResponse({"error": "model unavailable"}, status_code=503)
            )
        if config.mode == "rate_limited":
            headers = {}
            if config.retry_after_s is not None:
                headers["retry-after"] = f"{config.retry_after_s:g}"
            return timed(
                started,
                generation,
                JSONResponse({"error": "rate limited"}, status_code=429, headers=headers),
            )
        if config.mode == "slow":
            await asyncio.sleep(config.slow_ms / 1000)
        user = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
        if config.invalid_times > 0 or config.mode == "invalid_json":
            config.invalid_times = max(0, config.invalid_times - 1)
            content = '{"headline": "not quite JSON", "factors": [ '
        else:
            content = json.dumps(explanation_for(user))
        prompt_chars = sum(len(str(m.get("content", ""))) for m in messages)
        finish = "length" if config.mode == "length" else "stop"
        return timed(
            started,
            generation,
            JSONResponse(completion_body(model, content, prompt_chars, finish)),
        )

    async def control(request: Request) -> Response:
        body = await request.json()
        try:
            config = Config.from_json(body)
        except (TypeError, ValueError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        state.config = config
        if body.get("reset_stats"):
            state.reset_stats()
        return JSONResponse({"ok": True})

    async def stats(_: Request) -> Response:
        return JSONResponse(
            {
                "requests": state.requests,
                "by_model": dict(state.by_model),
                "by_status": dict(state.by_status),
                "with_bearer": state.with_bearer,
                "server_ms": list(state.server_ms),
            }
        )

    async def health(_: Request) -> Response:
        return JSONResponse({"ok": True})

    async def models(_: Request) -> Response:
        return JSONResponse({"object": "list", "data": []})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/control", control, methods=["POST"]),
            Route("/stats", stats, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    uvicorn.run(
        build_app(),
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,
    )


if __name__ == "__main__":
    main()
