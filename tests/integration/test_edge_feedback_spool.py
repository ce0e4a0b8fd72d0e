"""Feedback no origin can take now is held on the edge's disk and handed on later (issue 30,
item 1: ``edge.origins.feedback_spool``): acknowledged with 202 once durable there, in the
origin's event log once the origin is back, once only; what a gone edge process held is
adopted by another; a full spool refuses as before (503). The real origin and edge apps in
process, the suite's Redis between them."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from redis.asyncio import Redis

from config.settings import Settings
from edge.app import create_app as create_edge
from edge.node import Edge
from edge.origins.feedback_spool import FeedbackSpool
from origin.app import create_app as create_origin
from protocol import keys
from protocol.events import decode_event
from tests.apps import serving
from tests.fakes import FakeClock
from tests.integration.test_edge_api import EdgeUnderTest, Switchable

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Spooled:
    api: EdgeUnderTest
    node: Edge
    directory: Path
    partitions: int

    @property
    def spool(self) -> FeedbackSpool:
        assert self.node.feedback_spool is not None
        return self.node.feedback_spool


@pytest.fixture
def spool_settings(origin_settings: Settings, tmp_path: Path) -> Settings:
    return origin_settings.model_copy(
        update={"edge_ranking": False, "edge_feedback_spool_dir": tmp_path / "spool"}
    )


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[Spooled]:
    origin_app = create_origin(settings, rng=np.random.default_rng(7))
    network = Switchable(origin_app)
    # Now, not the suite's fixed moment: the origin checks the times the edge stamps on
    # what it held against its own wall clock.
    clock = FakeClock(now=time.time())
    edge_app = create_edge(settings, region="us-east", clock=clock, origin_transport=network)
    async with serving(origin_app, "http://origin"), serving(edge_app, "http://edge") as client:
        node: Edge = edge_app.fastapi.state.edge
        api = EdgeUnderTest(client, network, clock)
        assert settings.edge_feedback_spool_dir is not None
        yield Spooled(api, node, settings.edge_feedback_spool_dir, settings.event_partitions)


@pytest.fixture
async def stack(spool_settings: Settings) -> AsyncIterator[Spooled]:
    async with running(spool_settings) as spooled:
        yield spooled


async def events_of(redis: Redis, user_id: str, partitions: int) -> list[tuple[str, str]]:
    stream = keys.events_stream(keys.partition_of(user_id, partitions))
    return [
        (event.item_id, event.interaction_id)
        for event in (decode_event(fields[b"e"]) for _, fields in await redis.xrange(stream))
        if event.user_id == user_id
    ]


async def until(check: Callable[[], Awaitable[bool]], timeout_s: float = 10.0) -> None:
    for _ in range(int(timeout_s / 0.05)):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


async def test_feedback_the_origin_cannot_take_is_held_then_handed_on_once(
    stack: Spooled, redis: Redis
) -> None:
    stack.api.network.down = True
    held = await stack.api.feedback("ann", "it-000001", "it-000002")
    assert held.status_code == 202, held.text
    assert held.json()["status"] == "held"
    assert held.json()["processed"] == 2
    assert len(stack.spool) == 1
    assert [p.name for p in stack.spool.own.glob("*.json")]  # on disk before the answer
    assert await events_of(redis, "ann", stack.partitions) == []
    stack.api.network.down = False

    async def handed_on() -> bool:
        return len(stack.spool) == 0

    await until(handed_on)
    events = await events_of(redis, "ann", stack.partitions)
    assert [item for item, _ in events] == ["it-000001", "it-000002"]
    assert stack.spool.counters.forwarded == 1
    metrics = (await stack.api.client.get("/metrics")).text
    assert 'perso_edge_feedback_spool_total{region="us-east",what="held"} 1.0' in metrics
    assert 'perso_edge_feedback_held{region="us-east"} 0.0' in metrics


async def test_a_held_request_the_origin_recorded_after_all_is_not_counted_twice(
    stack: Spooled, redis: Redis
) -> None:
    """The edge gave up on a call the origin did record (a timeout after the append): the
    held copy carries the interaction ids the origin derived, so it is recognised."""
    direct = await stack.api.feedback("bob", "it-000003")
    assert direct.status_code == 200
    [(_, derived)] = await events_of(redis, "bob", stack.partitions)
    stack.api.network.down = True
    held = await stack.api.feedback("bob", "it-000003")  # the same request again
    assert held.status_code == 202
    stack.api.network.down = False

    async def handed_on() -> bool:
        return stack.spool.counters.forwarded == 1

    await until(handed_on)
    assert await events_of(redis, "bob", stack.partitions) == [("it-000003", derived)]


# A process that holds one request and dies without a word (no close, no clean-up).
DIES_HOLDING = """
import asyncio, os, sys
from pathlib import Path
from edge.origins.feedback_spool import FeedbackSpool

async def never(body):
    raise AssertionError("not sent")

async def main():
    spool = FeedbackSpool(Path(sys.argv[1]), never)
    assert await spool.hold(sys.argv[2].encode())

asyncio.run(main())
os._exit(0)
"""


async def test_what_a_gone_process_held_is_adopted_and_handed_on(
    stack: Spooled, redis: Redis
) -> None:
    body = '{"user_id":"cid","feedback":[{"item_id":"it-000004","action":"click"}]}'
    died = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", DIES_HOLDING, str(stack.directory), body],
        cwd=REPO,
        capture_output=True,
        check=False,
    )
    assert died.returncode == 0, died.stderr

    async def handed_on() -> bool:
        return bool(await events_of(redis, "cid", stack.partitions))

    await until(handed_on)
    assert stack.spool.counters.adopted == 1
    assert [p for p in stack.directory.iterdir() if p != stack.spool.own] == []


async def test_a_full_spool_refuses_as_before(spool_settings: Settings, redis: Redis) -> None:
    settings = spool_settings.model_copy(update={"edge_feedback_spool_max": 1})
    async with running(settings) as stack:
        stack.api.network.down = True
        assert (await stack.api.feedback("dan", "it-000005")).status_code == 202
        refused = await stack.api.feedback("dan", "it-000006")
        assert refused.status_code == 503
        assert refused.json()["error"] == "origin_unavailable"
        assert stack.spool.counters.full == 1


async def test_without_a_spool_the_edge_refuses_as_before(
    spool_settings: Settings, redis: Redis
) -> None:
    settings = spool_settings.model_copy(update={"edge_feedback_spool_max": 0})
    async with running(settings) as stack:
        assert stack.node.feedback_spool is None
        stack.api.network.down = True
        assert (await stack.api.feedback("eve", "it-000007")).status_code == 503
