"""``perso up``: Redis, catalog, origin, worker and three edges as real processes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
import redis as redis_sync
from redis.asyncio import Redis

from origin.learned.user_models import decode_record
from protocol import keys
from protocol.events import decode_event
from protocol.vectors import unpack_vector
from sync.codec import decode_entry as decode_sync_entry
from tests.e2e.conftest import RunningStack, child_pid, free_port_run, perso_env, start_stack

pytestmark = pytest.mark.e2e

PARTITIONS = 4


def personalize_body(user_id: str, **context: Any) -> dict[str, Any]:
    return {
        "user_id": user_id,
        "context": {"page_type": "category", "device": "tablet", **context},
    }


async def test_every_process_answers_health_and_readiness(stack: RunningStack) -> None:
    assert set(stack.edges) == {"us-east", "eu-west", "ap-south"}
    async with httpx.AsyncClient(timeout=5) as client:
        for base in [stack.origin_url, *stack.edges.values()]:
            assert (await client.get(f"{base}/healthz")).status_code == 200
            ready = await client.get(f"{base}/readyz")
            assert ready.status_code == 200, ready.text
    assert urlparse(stack.redis_url).hostname == "127.0.0.1"


async def test_a_miss_then_a_hit_at_every_edge(stack: RunningStack) -> None:
    """A new user at each region's edge: the first request fills the segment's pool from
    the origin (a miss), the next is ranked from it at the edge with no origin call (a
    hit), each by the segment's own ranking."""
    async with httpx.AsyncClient(timeout=5) as client:
        for region, base in stack.edges.items():
            user = f"e2e-{region}"
            body = personalize_body(user, geo={"country": "BR"})
            auth = await stack.user_headers(client, user)
            first = (await client.post(f"{base}/v1/personalize", json=body, headers=auth)).json()
            second = (await client.post(f"{base}/v1/personalize", json=body, headers=auth)).json()
            assert (first["metadata"]["ranked_by"], first["metadata"]["cache_hit"]) == (
                "edge",
                False,
            )
            assert (second["metadata"]["tier"], second["metadata"]["cache_hit"]) == ("edge", True)
            assert second["metadata"]["ranked_by"] == "edge"
            assert len(first["items"]) == len(second["items"]) == 20


async def test_each_edge_is_its_own_identity_at_the_origin(stack: RunningStack) -> None:
    """``perso up`` gives each edge process a service token of its own (revocable alone,
    ``POST /v1/admin/services/{name}/revoke``); the shared one stays for the tools."""
    admin = {"authorization": f"Bearer {stack.endpoints['admin_token']}"}
    async with httpx.AsyncClient(timeout=5) as client:
        listed = (await client.get(f"{stack.origin_url}/v1/admin/services", headers=admin)).json()
    assert [i["name"] for i in listed["identities"]] == [
        "shared",
        "edge-us-east",
        "edge-eu-west",
        "edge-ap-south",
    ]
    assert not any(i["revoked"] for i in listed["identities"])


async def test_feedback_through_an_edge_is_in_the_stream(stack: RunningStack) -> None:
    user = f"fb-{uuid.uuid4().hex[:8]}"
    interaction = f"ix-{uuid.uuid4().hex}"
    feedback = {
        "user_id": user,
        "feedback": [{"item_id": "it-000010", "action": "view", "interaction_id": interaction}],
    }
    async with httpx.AsyncClient(timeout=5) as client:
        response = await client.post(
            f"{stack.edges['eu-west']}/v1/feedback",
            json=feedback,
            headers=await stack.user_headers(client, user),
        )
    assert response.status_code == 200
    assert response.json()["status"] == "accepted"
    redis = Redis.from_url(stack.redis_url)
    try:
        stream = keys.events_stream(keys.partition_of(user, PARTITIONS))
        events = [decode_event(f[b"e"]) for _, f in await redis.xrange(stream)]
    finally:
        await redis.aclose()
    [event] = [e for e in events if e.user_id == user]
    assert (event.interaction_id, event.item_id, event.action) == (interaction, "it-000010", "view")


async def test_the_worker_turns_feedback_into_a_known_user(stack: RunningStack) -> None:
    user = f"known-{uuid.uuid4().hex[:8]}"
    feedback = {"user_id": user, "feedback": [{"item_id": "it-000042", "action": "purchase"}]}
    redis = Redis.from_url(stack.redis_url)
    async with httpx.AsyncClient(timeout=5) as client:
        auth = await stack.user_headers(client, user)
        assert (
            await client.post(f"{stack.edges['us-east']}/v1/feedback", json=feedback, headers=auth)
        ).status_code == 200
        try:
            record = decode_record(None, 32)
            for _ in range(100):
                record = decode_record(await redis.get(keys.user_record(user)), 32)
                if record.model is not None:
                    break
                await asyncio.sleep(0.1)
            assert record.model is not None, "the worker did not write a model within 10 s"
            # and told every region's edges (sync.messages.UserUpdate)
            entries = await redis.xrange(keys.edge_sync_stream("ap-south"))
            updated = [decode_sync_entry(fields)[0].message for _, fields in entries]
            assert any(getattr(m, "user_id", None) == user for m in updated)
            item = await redis.get(keys.item_vector("it-000042"))
            assert item is not None
            # the purchase moved the user's taste toward the item
            assert float(record.model.mean @ unpack_vector(item, 32)) > 0
        finally:
            await redis.aclose()
        answer = (
            await client.post(
                f"{stack.origin_url}/v1/personalize",
                json={**personalize_body(user), "options": {"exploration_rate": 0}},
                headers=stack.origin_headers,
            )
        ).json()
    # the worker's model now drives the answer
    assert "collaborative" in {i["source"] for i in answer["items"]}


async def test_an_admin_purge_reaches_the_edges_of_every_region(stack: RunningStack) -> None:
    admin = {"authorization": f"Bearer {stack.endpoints['admin_token']}"}
    async with httpx.AsyncClient(timeout=5) as client:
        shown: dict[str, list[str]] = {}
        for region, base in stack.edges.items():
            user = f"purge-{region}"
            auth = await stack.user_headers(client, user)
            body = personalize_body(user, geo={"country": "IN"})
            first = (await client.post(f"{base}/v1/personalize", json=body, headers=auth)).json()
            shown[region] = [i["item_id"] for i in first["items"]]
        tag = shown["us-east"][0]
        purged = await client.post(
            f"{stack.origin_url}/v1/admin/purge", json={"tag": tag}, headers=admin
        )
        assert purged.status_code == 200, purged.text
        assert set(purged.json()["regions"]) == set(stack.edges)
        for region, base in stack.edges.items():
            if tag not in shown[region]:
                continue
            user = f"purge-{region}"
            auth = await stack.user_headers(client, user)
            body = personalize_body(user, geo={"country": "IN"})
            for _ in range(50):  # applied within milliseconds; allow a loaded machine
                answer = await client.post(f"{base}/v1/personalize", json=body, headers=auth)
                if answer.headers["x-cache"] == "MISS":
                    break
                await asyncio.sleep(0.1)
            assert answer.headers["x-cache"] == "MISS", region
            metrics = (await client.get(f"{base}/metrics")).text
            assert 'type="PurgeTag"' in metrics


@pytest.mark.parametrize("target", ["origin", "us-east"])
async def test_malformed_input_is_a_400_naming_the_field(stack: RunningStack, target: str) -> None:
    base = stack.origin_url if target == "origin" else stack.edges[target]
    async with httpx.AsyncClient(timeout=5) as client:
        if target == "origin":
            client.headers.update(stack.origin_headers)
        else:
            client.headers.update(await stack.user_headers(client, "u"))
        bad = personalize_body("u", device="fridge")
        response = await client.post(f"{base}/v1/personalize", json=bad)
        assert response.status_code == 400
        assert response.json()["field"] == "context.device"
        response = await client.post(
            f"{base}/v1/feedback", content=b"{", headers={"content-type": "application/json"}
        )
        assert response.status_code == 400
        assert response.json()["field"] == "body"


async def test_an_edge_explains_and_caches_a_new_users_explanation(
    stack: RunningStack,
) -> None:
    user = f"explain-{uuid.uuid4().hex[:8]}"
    body = {"user_id": user, "item_id": "it-000010", "context": {"page_type": "item_detail"}}
    async with httpx.AsyncClient(timeout=5) as client:
        auth = await stack.user_headers(client, user)
        base = stack.edges["eu-west"]
        first = await client.post(f"{base}/v1/explain", json=body, headers=auth)
        second = await client.post(f"{base}/v1/explain", json=body, headers=auth)
        direct = await client.post(
            f"{stack.origin_url}/v1/explain", json=body, headers=stack.origin_headers
        )
        metrics = (await client.get(f"{base}/metrics")).text
    assert first.status_code == 200, first.text
    assert (first.headers["x-cache"], second.headers["x-cache"]) == ("MISS", "HIT")
    assert first.json()["item_id"] == "it-000010"
    assert first.json()["explanation"]["headline"]
    assert second.json()["explanation"] == first.json()["explanation"]
    assert direct.headers["x-perso-explain-scope"] == "segment:new"
    assert 'perso_edge_explain_answers_total{region="eu-west",served="hit"}' in metrics


async def until_ready(client: httpx.AsyncClient, url: str, timeout_s: float) -> float:
    """Seconds until ``url``/readyz answers 200."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        with contextlib.suppress(httpx.HTTPError):
            if (await client.get(f"{url}/readyz")).status_code == 200:
                return time.monotonic() - started
        await asyncio.sleep(0.2)
    raise AssertionError(f"{url} not ready within {timeout_s} s")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_a_killed_origin_is_restarted_on_its_port_while_the_edges_answer(
    stack: RunningStack,
) -> None:
    edge = stack.edges["ap-south"]
    origin_port = urlparse(stack.origin_url).port
    assert origin_port is not None
    async with httpx.AsyncClient(timeout=5) as client:
        users = ["outage-cached", "outage-new"]
        auth = {user: await stack.user_headers(client, user) for user in users}  # from the origin
        cached = personalize_body(users[0], geo={"country": "JP"})
        filled = await client.post(f"{edge}/v1/personalize", json=cached, headers=auth[users[0]])
        # The segment's pool is filled by this request (MISS) or was already held: the stack
        # is shared, and an earlier test's new user in this region fills the same pool.
        assert (filled.status_code, filled.headers["x-cache"]) in ((200, "MISS"), (200, "HIT"))

        killed = child_pid(stack.process.pid, "origin", "--port", str(origin_port))
        os.kill(killed, signal.SIGKILL)
        for _ in range(500):  # the kernel closes a killed process's socket at once
            if not _listening(origin_port):
                break
            await asyncio.sleep(0.01)
        # The origin is gone: the edge ranks from the segment's pool it holds, whatever the
        # page (a pool is keyed by segment, device and variant), with no origin call.
        hit = await client.post(f"{edge}/v1/personalize", json=cached, headers=auth[users[0]])
        never_filled = personalize_body(users[1], page_type="search", geo={"country": "JP"})
        other_page = await client.post(
            f"{edge}/v1/personalize", json=never_filled, headers=auth[users[1]]
        )
        assert not _listening(origin_port), "answered after the origin was back, not during"
        for answer in (hit, other_page):
            assert (answer.status_code, answer.headers["x-cache"]) == (200, "HIT")
            assert answer.json()["metadata"]["ranked_by"] == "edge"
            assert answer.json()["metadata"]["degraded"] is False

        # 1 s of back-off, then the origin starts again on its port (the catalog of 1,000
        # items loads in seconds) with the tokens it had: the edges' calls are accepted.
        await until_ready(client, stack.origin_url, timeout_s=45)
        assert stack.process.poll() is None, stack.log()
        assert child_pid(stack.process.pid, "origin", "--port", str(origin_port)) != killed
        for _ in range(100):  # the edge's circuit lets a probe through within seconds
            again = await client.post(
                f"{edge}/v1/personalize", json=never_filled, headers=auth[users[1]]
            )
            if again.headers["x-cache"] in ("MISS", "HIT"):
                break
            await asyncio.sleep(0.1)
        assert again.headers["x-cache"] in ("MISS", "HIT")
        assert again.json()["metadata"]["degraded"] is False
    log = stack.log()
    assert "origin was killed by SIGKILL after" in log
    assert "restarting in 1 s" in log
    assert "origin restarted (pid" in log


def test_a_second_stack_on_the_same_data_dir_is_refused(stack: RunningStack) -> None:
    env = perso_env(stack.data_dir, PERSO_ORIGIN_PORT="1", PERSO_EDGE_PORT_BASE="2")
    result = subprocess.run(
        [sys.executable, "-m", "perso", "up"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "in use" in result.stderr
    assert (stack.data_dir / "stack.json").exists()  # the running stack's file is untouched


def test_ctrl_c_stops_every_process(stack: RunningStack) -> None:
    ports = [urlparse(u).port for u in [stack.origin_url, *stack.edges.values(), stack.redis_url]]
    stack.process.send_signal(signal.SIGINT)
    assert stack.process.wait(timeout=60) == 0, stack.log()
    assert "stack stopped" in stack.log()
    assert not (stack.data_dir / "stack.json").exists()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        open_ports = [p for p in ports if p is not None and _listening(p)]
        if not open_ports:
            break
        time.sleep(0.1)
    assert not open_ports, f"still listening: {open_ports}"
    redis_log = (stack.data_dir / "redis" / "redis.log").read_text()
    assert "ready to exit" in redis_log  # a clean shutdown, AOF flushed


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_a_killed_supervisor_leaves_no_process_behind(tmp_path: Path) -> None:
    running = start_stack(tmp_path)
    urls = [running.origin_url, *running.edges.values(), running.redis_url]
    ports = [port for port in (urlparse(u).port for u in urls) if port is not None]
    running.process.kill()  # SIGKILL: no chance to stop its children itself
    running.process.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_listening(p) for p in ports):
        time.sleep(0.1)
    assert not [p for p in ports if _listening(p)]


async def test_a_dead_redis_is_restarted_on_its_port_with_its_data(tmp_path: Path) -> None:
    running = start_stack(tmp_path)
    try:
        client = Redis.from_url(running.redis_url)
        try:
            assert await client.exists(keys.CATALOG_MANIFEST)
            with contextlib.suppress(redis_sync.ConnectionError):
                await client.shutdown(nosave=True)  # the append-only file is still flushed
            for _ in range(300):  # 1 s of back-off, then the same URL answers again
                with contextlib.suppress(redis_sync.ConnectionError, redis_sync.BusyLoadingError):
                    if await client.ping():
                        break
                await asyncio.sleep(0.1)
            assert await client.exists(keys.CATALOG_MANIFEST)  # same data dir: data is back
        finally:
            await client.aclose()
        async with httpx.AsyncClient(timeout=5) as http:
            for base in [running.origin_url, *running.edges.values()]:
                await until_ready(http, base, timeout_s=30)  # their clients reconnected
        assert running.process.poll() is None
        log = running.log()
        assert "redis exited with code 0 after" in log
        assert "redis restarted (pid" in log
    finally:
        running.process.send_signal(signal.SIGINT)
        assert running.process.wait(timeout=60) == 0, running.log()


def test_ctrl_c_while_starting_stops_what_was_started(tmp_path: Path) -> None:
    # A catalog big enough that its ingest is still running when Ctrl-C comes.
    base = free_port_run(4)
    env = perso_env(
        tmp_path,
        PERSO_CATALOG_SIZE="30000",
        PERSO_ORIGIN_PORT=str(base),
        PERSO_EDGE_PORT_BASE=str(base + 1),
    )
    with subprocess.Popen(
        [sys.executable, "-m", "perso", "up"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as up:
        assert up.stdout is not None
        first_line = up.stdout.readline()  # "redis  redis://127.0.0.1:<port>/0 (embedded ...)"
        redis_port = urlparse(first_line.split()[1]).port
        time.sleep(1.0)
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=30) == 130
        assert "interrupted while starting" in up.stdout.read()
    assert redis_port is not None
    assert not _listening(redis_port)
    assert not (tmp_path / "stack.json").exists()
