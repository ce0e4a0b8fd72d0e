"""``perso up --catalog``: a stack that serves a catalog of your own only, as real processes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import RunningStack, perso_env, start_stack

pytestmark = pytest.mark.e2e

# Small and fast: one region, no worker, feature hashing instead of the sentence model.
LEAN = {"PERSO_REGIONS": "us-east", "PERSO_WORKERS": "0", "PERSO_TEXT_ENCODER": "hashing"}


def own_item(item_id: str, **fields: Any) -> dict[str, Any]:
    body = {"item_id": item_id, "version": 1, "title": f"Tent {item_id}", "category": "outdoors"}
    return {**body, "price": 149.0, **fields}


def personalize_body(user_id: str) -> dict[str, Any]:
    return {"user_id": user_id, "context": {"page_type": "home", "device": "mobile"}}


async def edge_items(stack: RunningStack, client: httpx.AsyncClient, user: str) -> list[str]:
    edge = stack.edges["us-east"]
    auth = await stack.user_headers(client, user)
    answer = await client.post(f"{edge}/v1/personalize", json=personalize_body(user), headers=auth)
    assert answer.status_code == 200, answer.text
    return [i["item_id"] for i in answer.json()["items"]]


async def test_a_stack_started_from_a_file_serves_its_items_only_and_deletes_reach_the_edge(
    tmp_path: Path,
) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps(own_item(f"sku-{n}")) + "\n" for n in range(5)))
    (tmp_path / "data").mkdir()
    stack = start_stack(tmp_path / "data", "--catalog", str(items), **LEAN)
    try:
        log = stack.log()
        assert "catalog    5 items from" in log, log
        assert "0 sample items dropped" in log
        admin = {"authorization": f"Bearer {stack.endpoints['admin_token']}"}
        async with httpx.AsyncClient(timeout=10) as client:
            shown = await edge_items(stack, client, "u-1")
            assert set(shown) == {f"sku-{n}" for n in range(5)}
            deleted = await client.delete(
                f"{stack.origin_url}/v1/admin/catalog/items/sku-0", headers=admin
            )
            assert deleted.status_code == 200, deleted.text
            assert deleted.json()["deleted"] == ["sku-0"]
            for _ in range(50):  # applied within milliseconds; allow a loaded machine
                if "sku-0" not in await edge_items(stack, client, "u-1"):
                    break
                await asyncio.sleep(0.1)
            assert "sku-0" not in await edge_items(stack, client, "u-1")
    finally:
        stack.stop()


async def test_an_empty_stack_answers_with_no_items_until_the_first_arrive(tmp_path: Path) -> None:
    stack = start_stack(tmp_path, "--catalog", "empty", **LEAN)
    try:
        assert "catalog    0 items of your own (empty start)" in stack.log()
        admin = {"authorization": f"Bearer {stack.endpoints['admin_token']}"}
        async with httpx.AsyncClient(timeout=10) as client:
            assert await edge_items(stack, client, "u-1") == []
            added = await client.post(
                f"{stack.origin_url}/v1/admin/catalog/items",
                json=[own_item("sku-1")],
                headers=admin,
            )
            assert added.status_code == 200, added.text
            # the empty answer the edge cached is kept 10 s at most
            added_at = time.monotonic()
            while not (shown := await edge_items(stack, client, "u-2")):
                assert time.monotonic() - added_at < 12, "the first item did not show"
                await asyncio.sleep(0.25)
            assert shown == ["sku-1"]
    finally:
        stack.stop()


def test_a_bad_file_stops_the_start_with_the_lines_named_and_exit_code_2(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps(own_item("sku-1")) + "\nnot json\n" + json.dumps({"x": 1}) + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "perso", "up", "--catalog", str(items)],
        env=perso_env(tmp_path / "data", **LEAN),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "line 2: not JSON" in output
    assert "line 3, item_id: Field required" in output
    assert "nothing loaded" in output
    assert not (tmp_path / "data" / "stack.json").exists()


def test_the_demo_refuses_an_empty_catalog(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "perso", "demo", "--catalog", "empty"],
        env=perso_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "the demo needs items" in result.stderr
