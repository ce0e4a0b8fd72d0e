"""``perso up --redis cluster``: the whole stack on an embedded Redis Cluster (3 primaries,
a replica each) as real processes: a slate through an edge, a click acknowledged once a
replica has it, learnt by the workers into the user's model, heard by every region's
edges; a killed primary's replica takes over and the stack keeps answering."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import Iterator

import httpx
import pytest

from origin.learned.user_models import decode_record
from protocol import keys
from redis_client.client import RedisClient, connect, node_of
from sync.codec import decode_entry as decode_sync_entry
from tests.e2e.conftest import RunningStack, start_stack

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(tmp_path_factory.mktemp("cluster-stack"), "--redis", "cluster")
    yield running
    running.stop()


async def click_until_learnt(stack: RunningStack, redis: RedisClient, user: str) -> None:
    feedback = {"user_id": user, "feedback": [{"item_id": "it-000042", "action": "purchase"}]}
    async with httpx.AsyncClient(timeout=10) as client:
        auth = await stack.user_headers(client, user)
        slate = await client.post(
            f"{stack.edges['us-east']}/v1/personalize",
            json={"user_id": user, "context": {"page_type": "home", "device": "mobile"}},
            headers=auth,
        )
        assert slate.status_code == 200
        assert len(slate.json()["items"]) == 20
        # As a client does: resent after Retry-After while it is refused. Around a failover
        # the partition's new primary has no replica until the killed node is back and
        # rejoins as one, and a click no replica confirmed is not acknowledged by the
        # origin: the edge holds it (202) and hands it on once one is.
        for _ in range(30):
            answer = await client.post(
                f"{stack.edges['us-east']}/v1/feedback", json=feedback, headers=auth
            )
            if answer.status_code != 503:
                break
            await asyncio.sleep(float(answer.headers.get("retry-after", "1")))
        assert answer.status_code in (200, 202), answer.text
    # a held click waits for the edge's next attempt (its back-off doubles from 1 s)
    for _ in range(300):
        record = decode_record(await redis.get(keys.user_record(user)), 32)
        if record.model is not None:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the workers did not learn the click within 30 s")


async def test_a_click_through_an_edge_is_learnt_and_heard_by_every_region(
    cluster_stack: RunningStack,
) -> None:
    assert cluster_stack.redis_url.startswith("redis-cluster://")
    assert "replica each" in cluster_stack.log()
    user = f"cl-{uuid.uuid4().hex[:8]}"
    redis = connect(cluster_stack.redis_url)
    try:
        await click_until_learnt(cluster_stack, redis, user)
        entries = await redis.xrange(keys.edge_sync_stream("ap-south"))
        updated = [decode_sync_entry(fields)[0].message for _, fields in entries]
        assert any(getattr(m, "user_id", None) == user for m in updated)
    finally:
        await redis.aclose()


async def test_a_killed_primary_is_replaced_and_clicks_are_still_learnt(
    cluster_stack: RunningStack,
) -> None:
    redis = connect(cluster_stack.redis_url, socket_timeout=2.0)
    try:
        key = keys.events_stream(0)
        await redis.exists(key)
        primary = node_of(redis, key)
        assert primary is not None
        victim = _pid_listening(int(primary.port))
        os.kill(victim, signal.SIGKILL)
        # Every partition, the killed primary's among them, learns again once the replica
        # was promoted (the cluster's node timeout is 1 s).
        users = [f"fo-{n}-{uuid.uuid4().hex[:6]}" for n in range(8)]
        for user in users:
            await click_until_learnt(cluster_stack, redis, user)
    finally:
        await redis.aclose()


def _pid_listening(port: int) -> int:
    """The pid of the process listening on ``port`` (a cluster node of the stack)."""
    inode = None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                local, state = fields[1], fields[3]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    inode = fields[9]
    assert inode is not None, f"nothing listens on {port}"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return int(pid)
        except OSError:
            continue
    raise AssertionError(f"no process holds the socket of port {port}")
