"""A stream worker killed with SIGKILL in the middle of its batches: another worker
reclaims what it left pending, and every accepted event is applied exactly once."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from redis.asyncio import Redis

from origin.embedding_state import state_version
from origin.event_streams import ensure_groups
from perso.redis_server import RedisServer
from protocol import keys
from protocol.events import FeedbackEvent, encode_event
from protocol.vectors import pack_vector
from tests.e2e.conftest import perso_env

pytestmark = pytest.mark.e2e

DIM = 8
PARTITIONS = 2
USERS = 200
EVENTS = 4000


def start_worker(env: dict[str, str], name: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "perso", "worker", "--consumer", name],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


async def applied(redis: Redis) -> int:
    states = await redis.mget([keys.user_state(f"u-{u}") for u in range(USERS)])
    return sum(state_version(raw) for raw in states)


async def outstanding(redis: Redis) -> int:
    """Entries not yet acknowledged, delivered or not."""
    total = 0
    for stream in keys.events_streams(PARTITIONS):
        info = await redis.xinfo_stream(stream)
        for group in await redis.xinfo_groups(stream):
            total += group["pending"]
            if group["last-delivered-id"] != info["last-generated-id"]:
                total += 1
    return total


async def test_a_killed_worker_loses_and_repeats_nothing(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis", persistent=False).start()
    redis = Redis.from_url(server.url)
    env = perso_env(
        tmp_path,
        REDIS_URL=server.url,
        PERSO_EMBEDDING_DIM=str(DIM),
        PERSO_EVENT_PARTITIONS=str(PARTITIONS),
        PERSO_WORKER_BATCH_SIZE="50",
        PERSO_WORKER_CLAIM_IDLE_MS="500",
    )
    first = second = None
    try:
        vectors = np.eye(5, DIM, dtype=np.float32)
        for i in range(5):
            await redis.set(keys.item_vector(f"it-{i}"), pack_vector(vectors[i]))
        await ensure_groups(redis, PARTITIONS)
        ms = int(time.time() * 1000)
        async with redis.pipeline(transaction=False) as pipe:
            for n in range(EVENTS):
                user = f"u-{n % USERS}"
                e = FeedbackEvent(f"ix-{n}", user, f"it-{n % 5}", "click", ms, ms)
                pipe.xadd(
                    keys.events_stream(keys.partition_of(user, PARTITIONS)),
                    {"e": encode_event(e)},
                )
            await pipe.execute()

        first = start_worker(env, "doomed", tmp_path / "doomed.log")
        for _ in range(12_000):  # up to a minute: kill it at its first written batch
            if await applied(redis) > 0:
                break
            await asyncio.sleep(0.005)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        done_by_first = await applied(redis)
        assert 0 < done_by_first < EVENTS, "the worker was not killed mid-way"

        second = start_worker(env, "survivor", tmp_path / "survivor.log")
        for _ in range(600):
            if await outstanding(redis) == 0:
                break
            await asyncio.sleep(0.1)
        assert await outstanding(redis) == 0, (tmp_path / "survivor.log").read_text()
        # every accepted click applied exactly once: one version step each
        assert await applied(redis) == EVENTS
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=10)
        await redis.aclose()
        server.stop()
