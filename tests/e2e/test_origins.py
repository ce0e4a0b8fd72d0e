"""``perso up --origins 2``: a catalog origin and a catalog replica as real processes, kept
in step through the origins' stream, each supervised like the single origin."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import RunningStack, start_stack

pytestmark = pytest.mark.e2e

# Small and fast: one region, no worker, feature hashing instead of the sentence model.
LEAN = {"PERSO_REGIONS": "us-east", "PERSO_WORKERS": "0", "PERSO_TEXT_ENCODER": "hashing"}


async def shown(client: httpx.AsyncClient, origin: str, stack: RunningStack) -> list[str]:
    body: dict[str, Any] = {
        "user_id": "u-1",
        "context": {"page_type": "home", "device": "mobile"},
        "constraints": {"categories": ["replicated"]},
    }
    answer = await client.post(f"{origin}/v1/personalize", json=body, headers=stack.origin_headers)
    assert answer.status_code == 200, answer.text
    return [i["item_id"] for i in answer.json()["items"]]


async def eventually(check: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "not within the time allowed"
        await asyncio.sleep(0.05)


async def test_two_origins_serve_one_catalog_and_follow_each_other(tmp_path: Path) -> None:
    stack = start_stack(tmp_path, "--origins", "2", ports=5, **LEAN)
    try:
        first, second = stack.endpoints["origin_urls"]
        assert stack.origin_url == first
        # The edges were moved past the second origin's port.
        port = int(first.rsplit(":", 1)[1])
        assert stack.edges["us-east"] == f"http://127.0.0.1:{port + 2}"
        log = stack.log()
        assert f"origin     {first}  (catalog origin)" in log, log
        assert f"origin     {second}  (catalog replica)" in log, log
        assert (tmp_path / "logs" / "origin-1.log").exists()
        admin = {"authorization": f"Bearer {stack.endpoints['admin_token']}"}
        async with httpx.AsyncClient(timeout=10) as client:
            found = (await client.get(f"{second}/dependencies")).json()["dependencies"]
            assert found["catalog_origin"]["up"] is True
            assert found["catalog_origin"]["url"] == first
            assert found["catalog_origin"]["items"] == 1000
            # an item written through the catalog origin is served by the replica
            item = {"item_id": "sku-1", "version": 1, "title": "Tent", "price": 149.0}
            item["category"] = "replicated"
            written = await client.post(
                f"{first}/v1/admin/catalog/items", json=[item], headers=admin
            )
            assert written.status_code == 200, written.text

            async def replicated() -> bool:
                return await shown(client, second, stack) == ["sku-1"]

            await eventually(replicated)
            # a catalog write sent to the replica is refused, naming the catalog origin
            refused = await client.post(
                f"{second}/v1/admin/catalog/items", json=[item], headers=admin
            )
            assert refused.status_code == 409, refused.text
            assert first in refused.json()["reason"]
            # a policy promoted on the replica is live on the catalog origin
            policy = {"exploration_weight": 0.0}
            put = await client.put(f"{second}/v1/admin/policies/calm", json=policy, headers=admin)
            assert put.status_code == 201, put.text
            promoted = await client.post(f"{second}/v1/admin/policies/calm/promote", headers=admin)
            assert promoted.status_code == 200, promoted.text

            async def promoted_there() -> bool:
                answer = await client.post(
                    f"{first}/v1/personalize",
                    json={"user_id": "u-2", "context": {"page_type": "home", "device": "tv"}},
                    headers=stack.origin_headers,
                )
                return bool(answer.json()["metadata"]["policy"] == "calm/1")

            await eventually(promoted_there, timeout_s=2.0)  # the poll would take 30 s
    finally:
        stack.stop()
