"""Freshness: from a feedback event accepted (the intake's append returned) to the user's
new embedding being readable in Redis, under load.

An embedded Redis, a stream worker as its own process (``perso worker``, default
micro-batches: 100 events or 100 ms; freshness tiers off, so that every event of the load is
applied at once, as for power users), and in this process a background load of feedback
events appended through the intake (``FeedbackLog``) at a steady rate. Every 50 ms one probe
user's click is appended the same way and the state of that user is polled until its
version moves: that time is one sample.

Run: ``.venv/bin/python -m benchmarks.freshness [--rate 2000] [--probes 300]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from redis.asyncio import Redis

from benchmarks.report import finish, machine, percentile
from origin.learned.user_models import record_version
from origin.worker.event_log import FeedbackLog
from origin.worker.streams import ensure_groups
from perso.redis_server import RedisServer
from protocol import keys
from protocol.events import FeedbackEvent
from protocol.vectors import pack_vector

DIM = 128
PARTITIONS = 8
ITEMS = 5_000
BACKGROUND_USERS = 20_000
PROBE_EVERY_S = 0.05


def start_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "perso", "worker", "--consumer", "fresh"], env=env
    )


def stop_worker(worker: subprocess.Popen[bytes]) -> None:
    worker.terminate()
    worker.wait(timeout=30)


async def background(log: FeedbackLog, rate: int, stop: asyncio.Event) -> int:
    """Append ``rate`` events per second, in ticks of 10 ms, until ``stop``."""
    rng = np.random.default_rng(3)
    sent = 0
    started = time.perf_counter()
    while not stop.is_set():
        due = int((time.perf_counter() - started) * rate)
        while sent < due:
            user = f"bg-{rng.integers(BACKGROUND_USERS)}"
            now = int(time.time() * 1000)
            event = FeedbackEvent(f"bg-{sent}", user, f"it-{rng.integers(ITEMS)}", "view", now, now)
            await log.append(user, [event])
            sent += 1
        await asyncio.sleep(0.01)
    return sent


async def probe(redis: Redis, log: FeedbackLog, n: int) -> float:
    user = f"probe-{n}"
    now = int(time.time() * 1000)
    await log.append(user, [FeedbackEvent(f"probe-{n}", user, "it-1", "click", now, now)])
    accepted = time.perf_counter()
    for _ in range(10_000):
        raw = await redis.get(keys.user_state(user))
        if isinstance(raw, bytes) and record_version(raw) > 0:
            return (time.perf_counter() - accepted) * 1000
        await asyncio.sleep(0.001)
    raise RuntimeError(f"probe {n}: no embedding after 10 s")


async def run(rate: int, probes: int) -> None:
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp) / "redis", persistent=False).start()
        redis = Redis.from_url(server.url)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("PERSO_")},
            "REDIS_URL": server.url,
            "PERSO_EMBEDDING_DIM": str(DIM),
            "PERSO_EVENT_PARTITIONS": str(PARTITIONS),
            "PERSO_LOG_LEVEL": "warning",
            # Every user treated as a power user: all of the load is applied at once (the
            # heaviest case; the tiers would hold most of it back).
            "PERSO_FRESHNESS_ACTIVE_S": "0",
            "PERSO_FRESHNESS_CASUAL_S": "0",
        }
        worker = start_worker(env)
        try:
            rng = np.random.default_rng(1)
            vectors = rng.standard_normal((ITEMS, DIM)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            async with redis.pipeline(transaction=False) as pipe:
                for i in range(ITEMS):
                    pipe.set(keys.item_vector(f"it-{i}"), pack_vector(vectors[i]))
                await pipe.execute()
            await ensure_groups(redis, PARTITIONS)
            log = FeedbackLog(redis, partitions=PARTITIONS, dedup_ttl_s=600, clock=time.time)
            stop = asyncio.Event()
            load = asyncio.create_task(background(log, rate, stop))
            await asyncio.sleep(2.0)  # the worker is up and the load is steady
            samples = []
            for n in range(probes):
                samples.append(await probe(redis, log, n))
                await asyncio.sleep(PROBE_EVERY_S)
            stop.set()
            sent = await load
        finally:
            stop_worker(worker)
            await redis.aclose()
            server.stop()
    p50, p99 = percentile(samples, 50), percentile(samples, 99)
    print(
        f"{probes} probes under {rate:,} events/s of background feedback ({sent:,} sent): "
        f"accepted -> readable p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {max(samples):.1f} ms"
    )
    finish(
        {
            "p50_ms": round(p50, 1),
            "p99_ms": round(p99, 1),
            "max_ms": round(max(samples), 1),
            "background_events_per_s": rate,
            "probes": probes,
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=2000, help="background events/s (2000)")
    parser.add_argument("--probes", type=int, default=300, help="probe events (300)")
    args = parser.parse_args()
    asyncio.run(run(args.rate, args.probes))


if __name__ == "__main__":
    main()
