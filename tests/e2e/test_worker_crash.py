"""A stream worker killed with SIGKILL in the middle of its batches: another worker
reclaims what it left pending, and every accepted event is applied exactly once, to the
users' models and to the items' posteriors, joined to its decision or not."""

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

from origin.event_streams.streams import ensure_groups
from origin.learned.posteriors import ALL_CONTEXTS, PosteriorConfig, PosteriorStore
from origin.learned.user_models import decode_record, observation_hash
from origin.worker.join_lessons import closing_id
from perso.redis_server import RedisServer
from protocol import keys
from protocol.decisions import DECISION_FIELD, Decision, Shown, encode_decision
from protocol.events import EVENT_FIELD, FeedbackEvent, encode_event
from protocol.vectors import pack_vector
from tests.e2e.conftest import perso_env

pytestmark = pytest.mark.e2e

DIM = 8
PARTITIONS = 2
USERS = 200
ITEMS = 5
EVENTS = 4000  # 20 per user: each user's window (the last 50) holds all of them
CELL = "desktop_evening"


def start_worker(env: dict[str, str], name: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "perso", "worker", "--consumer", name],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


async def windows(redis: Redis) -> list[list[int]]:
    """Each user's applied observations (hashes), sorted."""
    raws = await redis.mget([keys.user_record(f"u-{u}") for u in range(USERS)])
    return [sorted(decode_record(raw, DIM).window) for raw in raws]


async def applied(redis: Redis) -> int:
    return sum(len(window) for window in await windows(redis))


async def outstanding(redis: Redis) -> int:
    """Entries not yet acknowledged, delivered or not, and joins not yet closed."""
    total = 0
    for stream in [*keys.events_streams(PARTITIONS), *keys.decisions_streams(PARTITIONS)]:
        info = await redis.xinfo_stream(stream)
        for group in await redis.xinfo_groups(stream):
            total += group["pending"]
            if group["last-delivered-id"] != info["last-generated-id"]:
                total += 1
    for p in range(PARTITIONS):
        total += await redis.zcard(keys.decisions_due(p))
    return total


def click(ix: str, user: str, item: str, ms: int, request_id: str | None = None) -> bytes:
    return encode_event(FeedbackEvent(ix, user, item, "click", ms, ms, request_id=request_id))


async def feed(redis: Redis, ms: int) -> None:
    """The catalog's items, and the accepted clicks: feedback that names no answer, and a
    click on each user's answer."""
    vectors = np.eye(ITEMS, DIM, dtype=np.float32)
    for i in range(ITEMS):
        await redis.set(keys.item_vector(f"it-{i}"), pack_vector(vectors[i]))
    async with redis.pipeline(transaction=False) as pipe:
        for n in range(EVENTS):
            user = f"u-{n % USERS}"
            stream = keys.events_stream(keys.partition_of(user, PARTITIONS))
            pipe.xadd(stream, {EVENT_FIELD: click(f"ix-{n}", user, f"it-{n % ITEMS}", ms)})
        for u in range(USERS):
            user = f"u-{u}"
            stream = keys.events_stream(keys.partition_of(user, PARTITIONS))
            event = click(f"jx-{u}", user, f"it-{u % ITEMS}", ms, request_id=f"r-{u}")
            pipe.xadd(stream, {EVENT_FIELD: event})
        await pipe.execute()


async def log_answers(redis: Redis, ms: int) -> None:
    """The decisions of the answers the clicks name."""
    async with redis.pipeline(transaction=False) as pipe:
        for u in range(USERS):
            user = f"u-{u}"
            shown = tuple(Shown(f"it-{i}", i + 1, 0.5, 0.5) for i in range(ITEMS))
            d = Decision(f"r-{u}", user, "user", CELL, "home", ms, "edge:x", "t", "1", "m", shown)
            stream = keys.decisions_stream(keys.partition_of(user, PARTITIONS))
            pipe.xadd(stream, {DECISION_FIELD: encode_decision(d)})
        await pipe.execute()


async def assert_applied_once(redis: Redis) -> None:
    # every accepted click applied to its user exactly once, and each answer closed once
    for u, window in enumerate(await windows(redis)):
        ids = [f"ix-{n}" for n in range(u, EVENTS, USERS)] + [f"jx-{u}", closing_id(f"r-{u}")]
        assert window == sorted(observation_hash(i) for i in ids), f"u-{u}"
    # and to the items' posteriors: every click for all contexts, the joined ones in the
    # answers' cell too
    store = PosteriorStore(redis, PosteriorConfig(decay_half_life_s=0))
    items = [f"it-{i}" for i in range(ITEMS)]
    joined = USERS // ITEMS
    everywhere = await store.read_cell(ALL_CONTEXTS, items)
    assert everywhere.alpha.tolist() == [1.0 + EVENTS / ITEMS + joined] * ITEMS
    in_cell = await store.read_cell(CELL, items)
    assert in_cell.alpha.tolist() == [1.0 + joined] * ITEMS
    assert (in_cell.beta > 1).all()  # and the answers' misses


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
        PERSO_REWARD_WAIT_S="1",
        PERSO_BANDIT_DECAY_HALF_LIFE_S="0",  # posteriors are then exact counts
    )
    first = second = None
    try:
        await ensure_groups(redis, PARTITIONS)
        ms = int(time.time() * 1000)
        await feed(redis, ms)
        first = start_worker(env, "doomed", tmp_path / "doomed.log")
        for _ in range(12_000):  # up to a minute: kill it at its first written batch
            if await applied(redis) > 0:
                break
            await asyncio.sleep(0.005)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        done_by_first = await applied(redis)
        assert 0 < done_by_first < EVENTS, "the worker was not killed mid-way"
        # The answers' decisions arrive late (an edge's batch): the joins close after them.
        await log_answers(redis, ms)
        second = start_worker(env, "survivor", tmp_path / "survivor.log")
        for _ in range(600):
            if await outstanding(redis) == 0:
                break
            await asyncio.sleep(0.1)
        assert await outstanding(redis) == 0, (tmp_path / "survivor.log").read_text()
        await assert_applied_once(redis)
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=10)
        await redis.aclose()
        server.stop()
