"""The origin checks who calls before it reads a byte of the body, limits how many bytes
it reads, and judges client times against its own clock (issue 15 item 6)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from config.settings import Settings
from origin.app import create_app
from origin.catalog.ingest import ensure_sample_catalog
from tests.apps import serving
from tests.credentials import API_SECRETS
from tests.fakes import FakeClock

SERVICE_TOKEN = "service-secret-0123456789"
ADMIN_TOKEN = "admin-secret-0123456789"
SERVICE = {"authorization": f"Bearer {SERVICE_TOKEN}"}
ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}
API_KEY = {"x-api-key": API_SECRETS["premium"]}
JSON = {"content-type": "application/json"}
MiB = 1024 * 1024
# 2020-01-01T00:00:00Z: years before the wall clock, so only the origin's clock accepts a
# client time near it.
LONG_AGO = 1_577_836_800.0


class Tripwire:
    """A request body (sent chunked, without Content-Length) that records whether the
    server read any of it."""

    def __init__(self, data: bytes, chunk: int = 64 * 1024) -> None:
        self.data = data
        self.chunk = chunk
        self.read = False

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        self.read = True
        for start in range(0, len(self.data), self.chunk):
            yield self.data[start : start + self.chunk]


@pytest.fixture
async def guarded_settings(
    redis: Redis, redis_url: str, make_settings: Callable[..., Settings]
) -> Settings:
    """An origin as ``perso up`` runs it: service and admin tokens set."""
    settings = make_settings(
        redis_url=redis_url,
        event_partitions=4,
        origin_token=SERVICE_TOKEN,
        admin_token=ADMIN_TOKEN,
        text_encoder="hashing",
        origin_max_ingest_body_bytes=2 * MiB,
    )
    await ensure_sample_catalog(settings, redis)
    return settings


@pytest.fixture
async def origin(guarded_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(create_app(guarded_settings), "http://origin") as client:
        yield client


# Every protected operation, with the credential it wants.
PROTECTED = [
    ("POST", "/v1/personalize", SERVICE),
    ("POST", "/v1/internal/pools", SERVICE),
    ("POST", "/v1/internal/pools/items", SERVICE),
    ("POST", "/v1/internal/item-vectors", SERVICE),
    ("POST", "/v1/internal/item-vectors/items", SERVICE),
    ("POST", "/v1/feedback", SERVICE),
    ("POST", "/v1/explain", SERVICE),
    ("POST", "/v1/preferences", SERVICE),
    ("POST", "/v1/auth/token", API_KEY),
    ("POST", "/v1/admin/purge", ADMIN),
    ("POST", "/v1/admin/model-epoch", ADMIN),
    ("POST", "/v1/admin/catalog/items", ADMIN),
    ("POST", "/v1/admin/catalog/rebuild", ADMIN),
    ("GET", "/v1/admin/locks", ADMIN),
    ("DELETE", "/v1/admin/locks/catalog", ADMIN),
    ("GET", "/v1/internal/users/u-1/state", SERVICE),
    ("POST", "/v1/nothing-yet", SERVICE),  # a path nobody listed is closed, not open
]
# Credentials that are wrong for each route: none, or another kind's.
WRONG: dict[str, list[dict[str, str]]] = {
    "service": [{}, ADMIN, {"authorization": "Bearer nope"}, API_KEY],
    "admin": [{}, SERVICE, {"authorization": f"Basic {ADMIN_TOKEN}"}, API_KEY],
    "api_key": [{}, SERVICE, {"x-api-key": "wrong-secret-0123456789"}],
}


def kind(credential: dict[str, str]) -> str:
    return {id(SERVICE): "service", id(ADMIN): "admin", id(API_KEY): "api_key"}[id(credential)]


async def test_without_valid_credentials_a_401_and_the_body_is_never_read(
    origin: httpx.AsyncClient,
) -> None:
    for method, path, credential in PROTECTED:
        for content in (b"{not json", b"[" * (16 * MiB)):
            for wrong in WRONG[kind(credential)]:
                body = Tripwire(content)
                response = await origin.request(
                    method, path, content=body, headers={**JSON, **wrong}
                )
                assert response.status_code == 401, (path, wrong, response.text)
                problem = response.json()
                assert problem["error"] == "unauthorized"
                assert problem["field"] in ("authorization", "x-api-key")
                assert not body.read, path


async def test_with_credentials_the_broken_body_is_the_400(origin: httpx.AsyncClient) -> None:
    for method, path, credential in PROTECTED[:9]:  # those with a body
        response = await origin.request(
            method, path, content=b"{not json", headers={**JSON, **credential}
        )
        assert response.status_code == 400, (path, response.text)
        assert response.json()["field"] == "body"


def too_large(response: httpx.Response, limit: int) -> None:
    assert response.status_code == 413, response.text
    assert response.json() == {
        "error": "payload_too_large",
        "field": "body",
        "reason": f"request bodies are limited to {limit} bytes",
    }


@pytest.mark.parametrize(
    ("path", "credential"),
    [("/v1/personalize", SERVICE), ("/v1/feedback", SERVICE), ("/v1/auth/token", API_KEY)],
)
async def test_a_4mb_body_to_an_api_route_is_a_413(
    origin: httpx.AsyncClient, path: str, credential: dict[str, str]
) -> None:
    four_mb = b'{"user_id": "' + b"u" * (4 * 1000 * 1000) + b'"}'
    # announced by Content-Length: refused before reading
    declared = await origin.post(path, content=four_mb, headers={**JSON, **credential})
    too_large(declared, MiB)
    # chunked: refused once the bytes read pass the limit, the rest never read
    chunked = await origin.post(path, content=Tripwire(four_mb), headers={**JSON, **credential})
    too_large(chunked, MiB)


async def test_the_catalog_ingest_takes_larger_bodies_up_to_its_own_limit(
    origin: httpx.AsyncClient,
) -> None:
    padding = " " * (MiB + 1000)  # over the API routes' limit, under the ingest's
    within = f"[{padding}]".encode()
    response = await origin.post(
        "/v1/admin/catalog/items", content=within, headers={**JSON, **ADMIN}
    )
    assert response.status_code == 400, response.text  # parsed: an empty batch
    over = b"[" + b" " * (2 * MiB) + b"]"
    too_large(
        await origin.post("/v1/admin/catalog/items", content=over, headers={**JSON, **ADMIN}),
        2 * MiB,
    )
    too_large(
        await origin.post(
            "/v1/admin/catalog/items", content=Tripwire(over), headers={**JSON, **ADMIN}
        ),
        2 * MiB,
    )


async def test_public_routes_need_no_credentials(origin: httpx.AsyncClient) -> None:
    for path in ("/healthz", "/readyz", "/dependencies", "/metrics", "/openapi.json"):
        assert (await origin.get(path)).status_code == 200, path


async def test_a_wrong_method_is_a_405_naming_the_allowed_ones(
    origin: httpx.AsyncClient,
) -> None:
    response = await origin.get("/v1/personalize", headers=SERVICE)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json()["error"] == "method_not_allowed"
    stranger = await origin.get("/v1/personalize")
    assert stranger.status_code == 401  # who calls comes first


@pytest.fixture
async def origin_long_ago(guarded_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(guarded_settings, clock=FakeClock(LONG_AGO))
    async with serving(app, "http://origin") as client:
        yield client


def feedback_at(timestamp: str) -> dict[str, Any]:
    item = {"item_id": "it-000003", "action": "view", "timestamp": timestamp}
    return {"user_id": "u-clock", "feedback": [item]}


async def test_client_times_are_judged_against_the_origins_clock(
    origin_long_ago: httpx.AsyncClient,
) -> None:
    on_its_clock = await origin_long_ago.post(
        "/v1/feedback", json=feedback_at("2020-01-01T00:10:00Z"), headers=SERVICE
    )
    assert on_its_clock.status_code == 200, on_its_clock.text
    context = {"page_type": "home", "device": "mobile", "timestamp": "2019-12-31T23:00:00Z"}
    answer = await origin_long_ago.post(
        "/v1/personalize", json={"user_id": "u-clock", "context": context}, headers=SERVICE
    )
    assert answer.status_code == 200, answer.text
    # "now" by the wall clock is years ahead of the origin's
    ahead = await origin_long_ago.post(
        "/v1/feedback", json=feedback_at("2026-01-01T00:00:00Z"), headers=SERVICE
    )
    assert ahead.status_code == 400
    assert ahead.json()["field"] == "feedback[0].timestamp"
