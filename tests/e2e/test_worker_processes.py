"""``perso worker --count N``: N worker processes, a crashed one restarted under its own
consumer name, all of them stopped by one SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from redis.asyncio import Redis

from origin.event_streams.streams import ensure_groups
from perso.redis_server import RedisServer
from protocol import keys
from tests.e2e.conftest import perso_env

pytestmark = pytest.mark.e2e

PARTITIONS = 2


def children(pid: int) -> set[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return {int(p) for p in text.split()}


def start_workers(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "perso", "worker", "--count", "2", "--consumer", "w"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


async def consumers(redis: Redis) -> set[str]:
    stream = keys.events_streams(PARTITIONS)[0]
    rows = await redis.xinfo_consumers(stream, keys.WORKER_GROUP)
    return {row["name"].decode() for row in rows}


async def wait_for(predicate: Callable[[], Awaitable[bool]], timeout_s: float = 60.0) -> None:
    for _ in range(int(timeout_s / 0.1)):
        if await predicate():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("condition not reached in time")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_the_supervisor_runs_restarts_and_stops_its_workers(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis", persistent=False).start()
    redis = Redis.from_url(server.url)
    env = perso_env(
        tmp_path,
        REDIS_URL=server.url,
        PERSO_EMBEDDING_DIM="8",
        PERSO_EVENT_PARTITIONS=str(PARTITIONS),
    )
    log = tmp_path / "workers.log"
    supervisor = start_workers(env, log)
    try:
        await ensure_groups(redis, PARTITIONS)

        async def both_reading() -> bool:
            return await consumers(redis) >= {"w-0", "w-1"} and len(children(supervisor.pid)) == 2

        await wait_for(both_reading)
        before = children(supervisor.pid)
        victim = min(before)
        os.kill(victim, signal.SIGKILL)

        async def replaced() -> bool:
            now = children(supervisor.pid)
            return len(now) == 2 and victim not in now

        await wait_for(replaced)
        # the restarted child joined under an old name: still exactly two consumers
        assert await consumers(redis) == {"w-0", "w-1"}
        after = children(supervisor.pid)

        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=60) == 0, log.read_text()
        for pid in after:  # reaped by the supervisor, so gone
            assert not alive(pid)
        text = log.read_text()
        assert "restarting in" in text
        assert "worker processes stopped (1 restarts)" in text
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()
        await redis.aclose()
        server.stop()
