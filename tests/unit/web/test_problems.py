"""Every error of an app with our handlers has the one JSON shape, and no internals."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from protocol.api import PersonalizeRequest
from protocol.exceptions import ApiError
from web.problems import install_error_handlers


def app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/echo")
    async def echo(body: PersonalizeRequest) -> dict[str, str]:
        return {"user_id": body.user_id}

    @app.get("/busy")
    async def busy() -> None:
        raise ApiError(503, "unavailable", "try later", retry_after_s=2)

    @app.get("/bug")
    async def bug() -> None:
        raise RuntimeError("secret internals")

    return app


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client


async def test_validation_errors_are_400_with_field_and_reason(client: httpx.AsyncClient) -> None:
    response = await client.post("/echo", json={"user_id": "u", "context": {"page_type": "x"}})
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid_request"
    assert body["field"] == "context.page_type"
    assert {e["field"] for e in body["errors"]} == {"context.page_type", "context.device"}


async def test_api_errors_keep_status_and_retry_after(client: httpx.AsyncClient) -> None:
    response = await client.get("/busy")
    assert response.status_code == 503
    assert response.headers["retry-after"] == "2"
    assert response.json() == {"error": "unavailable", "field": None, "reason": "try later"}


async def test_a_bug_is_a_500_without_internals(client: httpx.AsyncClient) -> None:
    response = await client.get("/bug")
    assert response.status_code == 500
    assert response.json()["error"] == "internal_error"
    assert "secret" not in response.text


async def test_wrong_method_is_a_json_405(client: httpx.AsyncClient) -> None:
    response = await client.get("/echo")
    assert response.status_code == 405
    assert response.json()["error"] == "method_not_allowed"


async def test_a_405_allows_every_method_of_the_path_not_only_the_first_routes() -> None:
    """Two routes on one path (GET, DELETE): Starlette's 405 named the first one's only."""
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/locks/{name}")
    async def status(name: str) -> dict[str, str]:
        return {"name": name}

    @app.delete("/locks/{name}")
    async def release(name: str) -> dict[str, str]:
        return {"name": name}

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.request("OPTIONS", "/locks/x")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, DELETE"
