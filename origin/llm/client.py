"""The HTTP client of any OpenAI-compatible model server (vLLM, llama.cpp server, Ollama).

One call is one ``POST {base_url}/chat/completions`` asking for a JSON object, under a hard
deadline: the LLM path has 200 ms in all (the LLM latency budget), so a call that would
take longer is abandoned rather than waited for. Every way a call can go wrong leaves here
as one of the typed errors of ``origin.exceptions`` (``LlmTimeout``, ``LlmRateLimited``,
``LlmUnavailable``); what to do about it (breakers, backoff, failover) is the gateway's.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from config.settings import Settings
from origin.exceptions import LlmRateLimited, LlmTimeout, LlmUnavailable
from origin.llm.model import Completion, ModelSize, Prompt
from origin.llm.pricing import cost_usd

TEMPERATURE = 0.2
# Without usage figures from the server: about four characters per token (English text).
CHARS_PER_TOKEN = 4

# How a request holds the model to the answer's shape (``PERSO_LLM_OUTPUT_CONSTRAINT``):
# OpenAI's JSON mode, which every OpenAI-compatible server takes, or the prompt's GBNF
# grammar in llama.cpp's ``grammar`` field.
OutputConstraint = Literal["json_object", "gbnf"]


@dataclass(frozen=True, slots=True)
class ModelEndpoint:
    """One model on one server, and what its tokens cost."""

    size: ModelSize
    base_url: str  # up to and including the API prefix, e.g. http://host:8000/v1
    model: str
    usd_per_1k_tokens: float
    api_key: str | None = field(default=None, repr=False)
    constraint: OutputConstraint = "json_object"

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def cost_usd(self, completion: Completion) -> float:
        """Input and output tokens together, at this model's price."""
        return cost_usd(completion.input_tokens, completion.output_tokens, self.usd_per_1k_tokens)


def endpoints_from_settings(settings: Settings) -> tuple[ModelEndpoint, ModelEndpoint] | None:
    """The small and the large model; None when no model server is configured (templates
    only)."""
    if settings.llm_base_url is None:
        return None
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key is not None else None
    constraint = settings.llm_output_constraint
    small = ModelEndpoint(
        "small",
        settings.llm_base_url,
        settings.llm_small_model,
        settings.llm_small_usd_per_1k_tokens,
        key,
        constraint,
    )
    large = ModelEndpoint(
        "large",
        settings.llm_large_base_url or settings.llm_base_url,
        settings.llm_large_model,
        settings.llm_large_usd_per_1k_tokens,
        key,
        constraint,
    )
    return small, large


def request_body(endpoint: ModelEndpoint, prompt: Prompt) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": endpoint.model,
        "messages": [
            {"role": "system", "content": prompt.system},
            {"role": "user", "content": prompt.user},
        ],
        "max_tokens": prompt.max_output_tokens,
        "temperature": TEMPERATURE,
    }
    if endpoint.constraint == "gbnf" and prompt.grammar is not None:
        # Instead of response_format: llama.cpp refuses a grammar beside a JSON schema,
        # and its JSON mode is one.
        body["grammar"] = prompt.grammar
    else:
        body["response_format"] = {"type": "json_object"}
    return body


def estimate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date (``now``:
    Unix time); None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - now
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def parse_envelope(
    body: bytes, prompt: Prompt, fallback_model: str, elapsed_ms: float
) -> Completion:
    """The ``Completion`` inside an OpenAI chat completion; ``LlmUnavailable`` when the body
    is not one (the server is not what it claims to be, or broke mid-answer)."""
    try:
        data = json.loads(body)
        choice = data["choices"][0]
        content = choice["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise LlmUnavailable(f"not an OpenAI chat completion: {exc!r}") from exc
    if not isinstance(content, str):
        raise LlmUnavailable("not an OpenAI chat completion: message content is not a string")
    model = data.get("model")
    usage = data.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    input_tokens = usage.get("prompt_tokens")
    output_tokens = usage.get("completion_tokens")
    finish_reason = choice.get("finish_reason")
    return Completion(
        content=content,
        model=model if isinstance(model, str) and model else fallback_model,
        input_tokens=input_tokens
        if isinstance(input_tokens, int) and input_tokens >= 0
        else prompt.input_tokens,
        output_tokens=output_tokens
        if isinstance(output_tokens, int) and output_tokens >= 0
        else estimate_tokens(content),
        elapsed_ms=elapsed_ms,
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
    )


class LlmClient:
    """Chat completions from OpenAI-compatible servers over one connection pool."""

    def __init__(
        self,
        http: httpx.AsyncClient | None = None,
        *,
        timer: Callable[[], float] = time.perf_counter,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        # Our own pool unless given one; keep-alive matters: a new TCP (or TLS) connection
        # per call would eat a good part of a 200 ms budget.
        self._owned = http is None
        self._http = (
            http
            if http is not None
            else httpx.AsyncClient(
                limits=httpx.Limits(max_connections=100, max_keepalive_connections=20)
            )
        )
        self._timer = timer
        self._wall_clock = wall_clock

    async def aclose(self) -> None:
        if self._owned:
            await self._http.aclose()

    async def complete(
        self, endpoint: ModelEndpoint, prompt: Prompt, *, deadline_ms: float
    ) -> Completion:
        """The model's answer to ``prompt``, or a typed error within ``deadline_ms``."""
        if deadline_ms <= 0:
            raise LlmTimeout(f"{endpoint.model}: no time left for the call")
        headers = {"accept": "application/json"}
        if endpoint.api_key:
            headers["authorization"] = f"Bearer {endpoint.api_key}"
        seconds = deadline_ms / 1000
        started = self._timer()
        try:
            # asyncio.timeout bounds the whole exchange (connect, send, wait, read), which
            # httpx's per-phase timeouts alone do not; theirs stay as a second fence.
            async with asyncio.timeout(seconds):
                response = await self._http.post(
                    endpoint.url,
                    json=request_body(endpoint, prompt),
                    headers=headers,
                    timeout=httpx.Timeout(seconds),
                )
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise LlmTimeout(f"{endpoint.model}: no answer within {deadline_ms:.0f} ms") from exc
        except httpx.HTTPError as exc:
            raise LlmUnavailable(f"{endpoint.model} at {endpoint.base_url}: {exc!r}") from exc
        elapsed_ms = (self._timer() - started) * 1000
        status = response.status_code
        if status == httpx.codes.TOO_MANY_REQUESTS:
            raise LlmRateLimited(
                f"{endpoint.model}: 429 from the server",
                parse_retry_after(response.headers.get("retry-after"), self._wall_clock()),
            )
        if not 200 <= status < 300:
            raise LlmUnavailable(f"{endpoint.model}: HTTP {status} from the server", status)
        return parse_envelope(response.content, prompt, endpoint.model, elapsed_ms)
