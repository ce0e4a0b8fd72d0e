"""The OpenAI-compatible client at its HTTP seam (httpx.MockTransport): request shape,
envelope parsing, Retry-After, and the typed error of every way a call fails."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import httpx
import pytest

from config.settings import Settings
from origin.exceptions import LlmRateLimited, LlmTimeout, LlmUnavailable
from origin.llm.client import (
    LlmClient,
    ModelEndpoint,
    OutputConstraint,
    endpoints_from_settings,
    parse_envelope,
    parse_retry_after,
    request_body,
)
from origin.llm.model import Prompt

PROMPT = Prompt(system="sys", user="user", max_output_tokens=120, input_tokens=42)
ENDPOINT = ModelEndpoint("small", "http://llm.test/v1/", "m-small", 0.0002, api_key="sk-1")
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def envelope(content: Any = '{"headline": "h"}', **extra: Any) -> dict[str, Any]:
    return {"model": "served-model", "choices": [{"message": {"content": content}}], **extra}


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        ("3", 3.0),
        ("0.5", 0.5),
        ("-2", 0.0),
        ("soon", None),
        ("nan", None),
        ("Thu, 01 Jan 2026 00:00:10 GMT", 10.0),
        ("Wed, 31 Dec 2025 23:59:00 GMT", 0.0),
    ],
)
def test_parse_retry_after(value: str | None, seconds: float | None) -> None:
    assert parse_retry_after(value, NOW) == seconds


@pytest.mark.parametrize(
    ("body", "tokens"),
    [
        (envelope(usage={"prompt_tokens": 7, "completion_tokens": 3}), (7, 3)),
        (envelope(), (42, 5)),  # no usage: the prompt's estimate, ~4 chars a token
        (envelope(usage={"prompt_tokens": "7", "completion_tokens": -1}), (42, 5)),
    ],
)
def test_envelope_tokens(body: dict[str, Any], tokens: tuple[int, int]) -> None:
    completion = parse_envelope(json.dumps(body).encode(), PROMPT, "m-small", 12.5)
    assert completion.content == '{"headline": "h"}'
    assert completion.model == "served-model"
    assert (completion.input_tokens, completion.output_tokens) == tokens
    assert completion.elapsed_ms == 12.5


@pytest.mark.parametrize(
    ("choice", "finish_reason"),
    [
        ({"finish_reason": "stop"}, "stop"),
        ({"finish_reason": "length"}, "length"),
        ({}, None),
        ({"finish_reason": 3}, None),
    ],
)
def test_envelope_finish_reason(choice: dict[str, Any], finish_reason: str | None) -> None:
    body = {"choices": [{"message": {"content": "{}"}, **choice}]}
    completion = parse_envelope(json.dumps(body).encode(), PROMPT, "m-small", 1.0)
    assert completion.finish_reason == finish_reason


@pytest.mark.parametrize(
    "body",
    [b"", b"<html>", b"{}", b'{"choices": []}', json.dumps(envelope(content=None)).encode()],
)
def test_malformed_envelope_is_unavailable(body: bytes) -> None:
    with pytest.raises(LlmUnavailable, match="not an OpenAI chat completion"):
        parse_envelope(body, PROMPT, "m-small", 1.0)


async def call(handler: Any, deadline_ms: float = 1000) -> Any:
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    client = LlmClient(http, wall_clock=lambda: NOW)
    try:
        return await client.complete(ENDPOINT, PROMPT, deadline_ms=deadline_ms)
    finally:
        await http.aclose()


async def test_request_shape() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=envelope())

    completion = await call(handler)
    assert completion.content == '{"headline": "h"}'
    (request,) = seen
    assert str(request.url) == "http://llm.test/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-1"
    assert json.loads(request.content) == {
        "model": "m-small",
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "user"}],
        "max_tokens": 120,
        "temperature": 0.2,
        "response_format": {"type": "json_object"},
    }


@pytest.mark.parametrize(
    ("constraint", "grammar", "shape"),
    [
        ("json_object", None, {"response_format": {"type": "json_object"}}),
        ("json_object", "root ::= x", {"response_format": {"type": "json_object"}}),
        # A server that takes grammars gets the prompt's, and no JSON mode beside it.
        ("gbnf", "root ::= x", {"grammar": "root ::= x"}),
        ("gbnf", None, {"response_format": {"type": "json_object"}}),
    ],
)
def test_the_output_constraint(
    constraint: OutputConstraint, grammar: str | None, shape: dict[str, Any]
) -> None:
    endpoint = replace(ENDPOINT, constraint=constraint)
    body = request_body(endpoint, replace(PROMPT, grammar=grammar))
    assert {k: v for k, v in body.items() if k in ("grammar", "response_format")} == shape


def test_the_constraint_comes_from_the_settings() -> None:
    settings = Settings(LLM_BASE_URL="http://m/v1", llm_output_constraint="gbnf")  # type: ignore[call-arg]
    endpoints = endpoints_from_settings(settings)
    assert endpoints is not None
    assert [e.constraint for e in endpoints] == ["gbnf", "gbnf"]


@pytest.mark.parametrize(
    ("response", "error", "attrs"),
    [
        (httpx.Response(429, headers={"retry-after": "4"}), LlmRateLimited, {"retry_after_s": 4}),
        (httpx.Response(429), LlmRateLimited, {"retry_after_s": None}),
        (httpx.Response(503), LlmUnavailable, {"status": 503}),
        (httpx.Response(500), LlmUnavailable, {"status": 500}),
        (httpx.Response(401), LlmUnavailable, {"status": 401}),
        (httpx.Response(200, text="upstream broke"), LlmUnavailable, {"status": None}),
    ],
)
async def test_status_errors(
    response: httpx.Response, error: type[Exception], attrs: dict[str, Any]
) -> None:
    with pytest.raises(error) as raised:
        await call(lambda _: response)
    for name, value in attrs.items():
        assert getattr(raised.value, name) == value


@pytest.mark.parametrize(
    ("exc", "error"),
    [
        (httpx.ConnectError("refused"), LlmUnavailable),
        (httpx.RemoteProtocolError("peer closed"), LlmUnavailable),
        (httpx.ReadTimeout("slow"), LlmTimeout),
    ],
)
async def test_transport_errors(exc: Exception, error: type[Exception]) -> None:
    def handler(_: httpx.Request) -> httpx.Response:
        raise exc

    with pytest.raises(error):
        await call(handler)


async def test_no_time_left_sends_nothing() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=envelope())

    with pytest.raises(LlmTimeout):
        await call(handler, deadline_ms=0)
    assert seen == []


def test_endpoints_from_settings() -> None:
    assert endpoints_from_settings(Settings()) is None
    small, large = endpoints_from_settings(
        Settings(LLM_BASE_URL="http://a/v1", llm_large_base_url="http://b/v1")  # type: ignore[call-arg]
    ) or pytest.fail("no endpoints")
    assert (small.size, small.base_url, small.model) == (
        "small",
        "http://a/v1",
        Settings().llm_small_model,
    )
    assert (large.size, large.base_url, large.model) == (
        "large",
        "http://b/v1",
        Settings().llm_large_model,
    )
    assert small.api_key is None
    assert "sk" not in repr(ModelEndpoint("small", "u", "m", 0.0, "sk-secret"))
