"""The edge's origin client against httpx's MockTransport: the transport seam (STYLE 10).
The real origin is exercised by the integration and end-to-end tests."""

from __future__ import annotations

import httpx
import pytest

from edge.exceptions import OriginRejected, OriginUnavailable
from edge.origin_client import OriginClient
from protocol.api import FILL_SCOPE_HEADER, PersonalizeRequest

REQUEST = PersonalizeRequest.model_validate(
    {"user_id": "u", "context": {"page_type": "home", "device": "mobile"}}
)
ANSWER = {
    "request_id": "r",
    "user_id": "u",
    "items": [],
    "metadata": {
        "latency_ms": 1.0,
        "tier": "origin",
        "cache_hit": False,
        "exploration_applied": False,
        "model_version": "m",
    },
}


def client(handler: httpx.MockTransport) -> OriginClient:
    return OriginClient("http://origin", timeout_s=1.0, transport=handler)


async def test_segment_scope_is_sent_as_a_header() -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=ANSWER)

    origin = client(httpx.MockTransport(handle))
    await origin.personalize(REQUEST, segment_scope=True)
    await origin.personalize(REQUEST, segment_scope=False)
    assert seen[0].headers[FILL_SCOPE_HEADER] == "segment"
    assert FILL_SCOPE_HEADER not in seen[1].headers
    await origin.aclose()


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (httpx.Response(503, json={"error": "x"}), OriginUnavailable),
        (httpx.Response(500, text="boom"), OriginUnavailable),
        (httpx.Response(200, text="not json"), OriginUnavailable),
        (httpx.Response(200, json={"items": "wrong"}), OriginUnavailable),
        (httpx.Response(400, json={"error": "invalid_request"}), OriginRejected),
    ],
)
async def test_failures_are_classified(response: httpx.Response, error: type[Exception]) -> None:
    origin = client(httpx.MockTransport(lambda _: response))
    with pytest.raises(error):
        await origin.personalize(REQUEST, segment_scope=False)
    await origin.aclose()


async def test_transport_errors_mean_unavailable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    origin = client(httpx.MockTransport(refuse))
    with pytest.raises(OriginUnavailable):
        await origin.feedback(b"{}")
    assert await origin.healthy() is False
    await origin.aclose()


async def test_rejection_keeps_the_origin_answer() -> None:
    origin = client(httpx.MockTransport(lambda _: httpx.Response(400, content=b'{"field":"x"}')))
    with pytest.raises(OriginRejected) as info:
        await origin.feedback(b"{}")
    assert (info.value.status, info.value.body) == (400, b'{"field":"x"}')
    await origin.aclose()


async def test_the_service_token_is_sent_with_every_request() -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"status": "accepted", "processed": 1, "latency_ms": 1})

    client = OriginClient(
        "http://origin", timeout_s=1.0, token="t0k", transport=httpx.MockTransport(handle)
    )
    try:
        await client.feedback(b"{}")
    finally:
        await client.aclose()
    assert seen[0].headers["authorization"] == "Bearer t0k"
