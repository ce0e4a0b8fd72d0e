"""Service identities (issue 30, item 2: ``origin.service_identities``): each edge its own
token, one revoked without touching the others, on every origin within about a second
(this one at once), and restored. Two real origin apps over the suite's Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from pydantic import SecretStr
from redis.asyncio import Redis

from config.settings import Settings
from origin.app import create_app
from origin.catalog.ingest import ensure_sample_catalog
from protocol.policies import LIVE_POLICY_PATH
from tests.apps import serving

SHARED = "shared-service-token-0123456789"
EDGE_A = "edge-a-service-token-0123456789"
EDGE_B = "edge-b-service-token-0123456789"
ADMIN = {"authorization": "Bearer services-admin-token"}


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.fixture
async def origins(
    origin_settings: Settings, redis: Redis, tmp_path: Path
) -> AsyncIterator[tuple[httpx.AsyncClient, ...]]:
    settings = origin_settings.model_copy(
        update={
            "origin_token": SecretStr(SHARED),
            "service_tokens": SecretStr(f"edge-a={EDGE_A}, edge-b={EDGE_B}"),
            "admin_token": SecretStr("services-admin-token"),
        }
    )
    # Another process: the same Redis, its own (local) vector store.
    elsewhere = settings.model_copy(update={"data_dir": tmp_path / "elsewhere"})
    await ensure_sample_catalog(elsewhere, redis)
    first = create_app(settings, rng=np.random.default_rng(1))
    second = create_app(elsewhere, rng=np.random.default_rng(2))
    async with serving(first, "http://origin-1") as one, serving(second, "http://origin-2") as two:
        yield one, two


async def status(client: httpx.AsyncClient, token: str) -> int:
    return (await client.get(LIVE_POLICY_PATH, headers=bearer(token))).status_code


async def test_each_identity_and_the_shared_token_are_accepted(
    origins: tuple[httpx.AsyncClient, ...],
) -> None:
    one, _ = origins
    for token in (SHARED, EDGE_A, EDGE_B):
        assert await status(one, token) == 200
    refused = await one.get(LIVE_POLICY_PATH, headers=bearer("edge-c-service-token-01234567"))
    assert refused.status_code == 401
    assert refused.json()["field"] == "authorization"
    listed = (await one.get("/v1/admin/services", headers=ADMIN)).json()
    assert listed == {
        "identities": [
            {"name": "shared", "revoked": False},
            {"name": "edge-a", "revoked": False},
            {"name": "edge-b", "revoked": False},
        ]
    }


async def test_a_revoked_edge_is_refused_by_every_origin_and_the_others_are_not(
    origins: tuple[httpx.AsyncClient, ...],
) -> None:
    one, two = origins
    revoked = await one.post("/v1/admin/services/edge-a/revoke", headers=ADMIN)
    assert revoked.status_code == 200, revoked.text
    assert {"name": "edge-a", "revoked": True} in revoked.json()["identities"]
    refused = await one.get(LIVE_POLICY_PATH, headers=bearer(EDGE_A))
    assert refused.status_code == 401  # here at once
    assert "revoked" in refused.json()["reason"]
    assert await status(one, EDGE_B) == 200
    assert await status(one, SHARED) == 200
    # the other origin within a second
    for _ in range(40):
        if await status(two, EDGE_A) == 401:
            break
        await asyncio.sleep(0.05)
    assert await status(two, EDGE_A) == 401
    assert await status(two, EDGE_B) == 200
    restored = await one.post("/v1/admin/services/edge-a/restore", headers=ADMIN)
    assert restored.status_code == 200
    assert await status(one, EDGE_A) == 200


async def test_an_unknown_identity_is_a_404_and_revocation_wants_the_admin_token(
    origins: tuple[httpx.AsyncClient, ...],
) -> None:
    one, _ = origins
    unknown = await one.post("/v1/admin/services/edge-z/revoke", headers=ADMIN)
    assert (unknown.status_code, unknown.json()["field"]) == (404, "name")
    as_an_edge = await one.post("/v1/admin/services/edge-b/revoke", headers=bearer(EDGE_A))
    assert as_an_edge.status_code == 401


async def test_an_identity_rotating_has_both_tokens_valid_and_is_listed_once(
    origin_settings: Settings,
) -> None:
    """Rotation keeps the name: the new token beside the old one while the edge moves to
    it (then the old one is removed); revoking the name refuses both."""
    rotated = "edge-a-new-service-token-0123456789"
    settings = origin_settings.model_copy(
        update={
            "service_tokens": SecretStr(f"edge-a={EDGE_A},edge-a={rotated},edge-b={EDGE_B}"),
            "admin_token": SecretStr("services-admin-token"),
        }
    )
    async with serving(create_app(settings), "http://origin") as origin:
        assert [await status(origin, t) for t in (EDGE_A, rotated, EDGE_B)] == [200, 200, 200]
        listed = (await origin.get("/v1/admin/services", headers=ADMIN)).json()
        assert [i["name"] for i in listed["identities"]] == ["edge-a", "edge-b"]
        await origin.post("/v1/admin/services/edge-a/revoke", headers=ADMIN)
        assert [await status(origin, t) for t in (EDGE_A, rotated, EDGE_B)] == [401, 401, 200]
        await origin.post("/v1/admin/services/edge-a/restore", headers=ADMIN)
