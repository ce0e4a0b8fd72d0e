"""The storefront at the edge (issue 21), the real edge app in front of the real origin app
(in-process, over the suite's Redis): its files (types, conditionals, 404s, no listing, no
way out of the folder), and the demo token route, off (404, as if it did not exist) and on
(a token the edge itself accepts, bad input, rate limit, a refused key, the origin down)."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import numpy as np
import pytest
from pydantic import SecretStr
from starlette.types import Message

from config.settings import ConfigError, Settings
from edge.app import create_app as create_edge
from edge.http.asgi import EdgeFront
from edge.http.static import SITE_DIR
from origin.app import create_app as create_origin
from protocol.identity import verify
from tests.apps import serving
from tests.credentials import API_SECRETS, IDENTITY_KEY, bearer
from tests.fakes import FakeClock
from tests.integration.test_edge_api import Switchable

DEMO_KEY = SecretStr(API_SECRETS["standard"])
NOT_FOUND = {"error": "not_found", "field": None, "reason": "Not Found"}


class Unreachable(httpx.AsyncBaseTransport):
    """The network to an origin that is down: every call refused, and counted."""

    def __init__(self) -> None:
        self.calls = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        raise httpx.ConnectError("origin unreachable", request=request)


class Running:
    def __init__(
        self, client: httpx.AsyncClient, app: EdgeFront, network: Switchable | Unreachable
    ) -> None:
        self.client = client
        self.app = app
        self.network = network

    async def token(self, payload: Any) -> httpx.Response:
        return await self.client.post("/v1/demo/token", json=payload)

    async def raw(self, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
        """``path`` exactly as a server could hand it over (``..`` and all), straight to
        the edge's ASGI app: httpx would normalise it first."""
        sent: list[Message] = []

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Message) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "headers": [(b"host", b"edge")],
            "client": ("127.0.0.1", 1),
            "server": ("edge", 80),
            "root_path": "",
            "state": {},
        }
        await self.app(scope, receive, send)
        start, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:])
        headers = {k.decode(): v.decode() for k, v in start["headers"]}
        return start["status"], headers, body


@asynccontextmanager
async def running(settings: Settings, **edge_settings: Any) -> AsyncIterator[Running]:
    """The edge in front of the real origin app."""
    origin_app = create_origin(settings, rng=np.random.default_rng(7))
    network = Switchable(origin_app)
    edge_app = create_edge(
        settings.model_copy(update=edge_settings),
        region="us-east",
        clock=FakeClock(time.time()),
        origin_transport=network,
    )
    async with (
        serving(origin_app, "http://origin"),
        serving(edge_app, "http://edge") as client,
    ):
        yield Running(client, edge_app, network)


@pytest.fixture
async def plain(make_settings: Callable[..., Settings]) -> AsyncIterator[Running]:
    """An edge as in production (no demo token route), its origin down: what these tests
    ask needs neither the origin nor the node the lifespan builds, which is not started."""
    network = Unreachable()
    app = create_edge(make_settings(), region="us-east", origin_transport=network)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://edge") as client:
        yield Running(client, app, network)


@pytest.fixture
async def cut_off(make_settings: Callable[..., Settings]) -> AsyncIterator[Running]:
    """An edge in demo mode, started, whose origin is down from the start."""
    network = Unreachable()
    settings = make_settings(demo_tokens=True, demo_api_key=DEMO_KEY)
    app = create_edge(settings, region="us-east", origin_transport=network)
    async with serving(app, "http://edge") as client:
        yield Running(client, app, network)


@pytest.fixture
async def demo(origin_settings: Settings) -> AsyncIterator[Running]:
    """An edge in demo mode in front of the real origin."""
    async with running(origin_settings, demo_tokens=True, demo_api_key=DEMO_KEY) as edge:
        yield edge


# --- the page's files ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "content_type", "file"),
    [
        ("/", "text/html; charset=utf-8", "index.html"),
        ("/static/storefront.js", "text/javascript; charset=utf-8", "storefront.js"),
        ("/static/api.js", "text/javascript; charset=utf-8", "api.js"),
        ("/static/slate.js", "text/javascript; charset=utf-8", "slate.js"),
        ("/static/storefront.css", "text/css; charset=utf-8", "storefront.css"),
        ("/static/favicon.svg", "image/svg+xml", "favicon.svg"),
    ],
)
async def test_the_page_and_its_files(
    plain: Running, path: str, content_type: str, file: str
) -> None:
    response = await plain.client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"] == content_type
    assert response.content == (SITE_DIR / file).read_bytes()
    assert response.headers["x-content-type-options"] == "nosniff"
    assert int(response.headers["content-length"]) == len(response.content)
    again = await plain.client.get(path, headers={"if-none-match": response.headers["etag"]})
    assert (again.status_code, again.content) == (304, b"")
    head = await plain.client.head(path)
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-length"] == response.headers["content-length"]


async def test_the_page_is_accessible_html_with_a_strict_policy(plain: Running) -> None:
    response = await plain.client.get("/")
    html = response.text
    assert re.search(r'<html lang="en">', html)
    assert '<link rel="icon" href="/static/favicon.svg"' in html
    assert 'aria-live="polite"' in html
    # every input has its label
    for input_id in re.findall(r'<input[^>]*\bid="([^"]+)"', html):
        assert f'for="{input_id}"' in html, input_id
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "'unsafe-inline'" not in policy
    # nothing inline to allow
    assert "<script>" not in html
    assert "style=" not in html


@pytest.mark.parametrize(
    "path",
    [
        "/static/",  # no listing of the folder
        "/static",
        "/static/nothing.js",
        "/static/index.html",
        "/index.html",
        "/static/storefront",
        "/storefront.js",
        "/static/STOREFRONT.JS",
        "/static/../app.py",
        "/static/../../pyproject.toml",
        "/static/./storefront.js",
        "/static//storefront.js",
        "/static/%2e%2e/app.py",
        "/static/..%2fapp.py",
        "/edge/http/storefront/index.html",
        "/edge/http/static.py",
    ],
)
async def test_only_the_pages_exact_paths_exist(plain: Running, path: str) -> None:
    status, headers, body = await plain.raw("GET", path)
    assert status == 404, path
    assert headers["content-type"] == "application/json"
    assert b"<" not in body  # no file, no listing


async def test_encoded_climbing_over_http_is_a_404_too(plain: Running) -> None:
    for path in ("/static/%2e%2e/%2e%2e/pyproject.toml", "/static/%2E%2E%2Fapp.py"):
        response = await plain.client.get(path)
        assert response.status_code == 404, path
        assert response.json() == NOT_FOUND


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
async def test_the_pages_files_are_read_only(plain: Running, method: str) -> None:
    status, headers, _ = await plain.raw(method, "/static/storefront.js")
    assert (status, headers["allow"]) == (405, "GET, HEAD")


async def test_the_api_is_unchanged_beside_the_page(plain: Running) -> None:
    # the API's paths are still answered first
    status, headers, _ = await plain.raw("GET", "/v1/personalize")
    assert (status, headers["allow"]) == (405, "POST")
    assert (await plain.client.get("/healthz")).json() == {"status": "ok"}


# --- the demo token route ----------------------------------------------------------------


async def test_without_demo_mode_the_route_does_not_exist(plain: Running) -> None:
    for method in ("POST", "GET"):
        response = await plain.client.request(method, "/v1/demo/token", json={"user_id": "ada"})
        unknown = await plain.client.request(method, "/v1/no-such-route", json={"user_id": "a"})
        assert (response.status_code, response.json()) == (404, NOT_FOUND)
        assert (unknown.status_code, unknown.json()) == (404, NOT_FOUND)
    spec = (await plain.client.get("/openapi.json")).json()
    assert "/v1/demo/token" not in spec["paths"]
    assert plain.network.calls == 0  # no token was asked of the origin


async def test_a_demo_token_is_the_origins_and_works_at_the_edge(demo: Running) -> None:
    response = await demo.token({"user_id": "ada"})
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    claims = verify(body["token"], [IDENTITY_KEY.encode()], now_s=time.time())
    # signed by the origin for the demo key's shop and tier
    assert (claims.user_id, claims.api_key, claims.tier) == ("ada", "standard-shop", "standard")
    assert (body["user_id"], body["tier"], body["token_type"]) == ("ada", "standard", "Bearer")
    answer = await demo.client.post(
        "/v1/personalize",
        json={"user_id": "ada", "context": {"page_type": "home", "device": "desktop"}},
        headers=bearer(body["token"]),
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["user_id"] == "ada"
    # and only for that user
    other = await demo.client.post(
        "/v1/personalize",
        json={"user_id": "bob", "context": {"page_type": "home", "device": "desktop"}},
        headers=bearer(body["token"]),
    )
    assert other.status_code == 403


@pytest.mark.parametrize(
    ("content", "field"),
    [
        (b"{}", "user_id"),
        (b'{"user_id": ""}', "user_id"),
        (b'{"user_id": "a b"}', "user_id"),
        (b'{"user_id": "a}b"}', "user_id"),
        (b'{"user_id": 7}', "user_id"),
        (b'{"user_id": "' + b"x" * 129 + b'"}', "user_id"),
        (b'{"user_id": "ada", "ttl_s": 60}', "ttl_s"),
        (b"[]", "body"),
        (b"not json", "body"),
        (b"", "body"),
    ],
)
async def test_bad_input_is_a_400_naming_the_field(
    cut_off: Running, content: bytes, field: str
) -> None:
    calls = cut_off.network.calls
    response = await cut_off.client.post(
        "/v1/demo/token", content=content, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field
    assert cut_off.network.calls == calls  # the origin was not asked


async def test_other_methods_are_405(cut_off: Running) -> None:
    response = await cut_off.client.get("/v1/demo/token")
    assert (response.status_code, response.headers["allow"]) == (405, "POST")


async def test_a_shopper_is_rate_limited(demo: Running) -> None:
    codes = [(await demo.token({"user_id": "ada"})).status_code for _ in range(6)]
    assert codes == [200] * 5 + [429]  # a burst of 5, then one a second (the clock stands)
    limited = await demo.token({"user_id": "ada"})
    assert limited.status_code == 429
    assert int(limited.headers["retry-after"]) >= 1
    assert limited.json()["error"] == "rate_limited"
    # another shopper has their own allowance
    assert (await demo.token({"user_id": "grace"})).status_code == 200


async def test_a_key_the_origin_refuses_is_a_503_that_says_so(origin_settings: Settings) -> None:
    wrong = SecretStr("not-a-key-of-the-origin-0123")
    async with running(origin_settings, demo_tokens=True, demo_api_key=wrong) as edge:
        response = await edge.token({"user_id": "ada"})
    assert response.status_code == 503
    assert response.json()["error"] == "demo_tokens_unavailable"
    assert "PERSO_DEMO_API_KEY" in response.json()["reason"]


async def test_with_the_origin_down_a_503_with_retry_after(cut_off: Running) -> None:
    response = await cut_off.token({"user_id": "ada"})
    assert response.status_code == 503
    assert response.json()["error"] == "origin_unavailable"
    assert int(response.headers["retry-after"]) >= 1


async def test_the_route_is_in_the_openapi_document_when_on(cut_off: Running) -> None:
    spec = (await cut_off.client.get("/openapi.json")).json()
    operation = spec["paths"]["/v1/demo/token"]["post"]
    assert operation["security"] == []
    assert sorted(operation["responses"]) == ["200", "400", "413", "429", "503"]
    assert spec["components"]["schemas"]["DemoTokenRequest"]["required"] == ["user_id"]
    metadata = spec["components"]["schemas"]["ResponseMetadata"]["properties"]
    assert metadata["ranked_by"]["enum"] == ["edge", "origin"]


def test_demo_mode_needs_its_api_key(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(demo_tokens=True)
    with pytest.raises(ConfigError, match="PERSO_DEMO_API_KEY"):
        create_edge(settings, region="us-east")
