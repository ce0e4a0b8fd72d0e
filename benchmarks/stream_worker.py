"""Events per second through the streaming embedding worker, against a naive
one-event-at-a-time Algorithm 1, and the Redis memory of one user's state.

Both paths run in this process against the same embedded Redis on this machine
(the worker and Redis share the 2 cores): a backlog of feedback events is appended to the
``events:{p}`` streams, then drained through the consumer group:

- the worker (``origin.embedding_worker``): micro-batches, one pipelined read per batch,
  Algorithm 1 vectorised over the batch's users, one pipelined compare-and-set per batch,
  one acknowledgement per stream; measured with the seed's 100-event batches and with
  1,000-event batches (what a worker does with a backlog);
- ``perso worker --count 2``: two worker processes under the pool supervisor;
- the naive path: per event, read the user's state, embedding and item, apply the scalar
  Algorithm 1, write with the same compare-and-set script, acknowledge.

``bytes_per_user``: ``MEMORY USAGE`` of a user's embedding and state with a full window of
50 interactions at the default dimension (128), and at 512 (seed 000's dimension, where it
measured 3.2 KB per user).

Run: ``.venv/bin/python -m benchmarks.stream_worker [--events 200000]``
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import numpy as np
from redis.asyncio import Redis
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from benchmarks.report import finish, machine
from origin.embedding_batch import CAS_WRITE
from origin.embedding_state import (
    WorkerState,
    decode_state,
    encode_state,
    interaction_hash,
)
from origin.embedding_update import EmbeddingState, update_embedding
from origin.embedding_worker import EmbeddingWorker
from origin.event_streams import StreamReply, ensure_groups
from perso.redis_server import RedisServer
from protocol import keys
from protocol.events import FeedbackEvent, decode_event, encode_event
from protocol.vectors import pack_half, pack_vector, unpack_vector

DIM = 128
PARTITIONS = 8
ITEMS = 20_000
USERS = 20_000
NAIVE_EVENTS = 5_000
NOW = 1_767_225_600.0
ACTIONS = ("view", "view", "view", "click", "click", "add_to_cart", "purchase", "dismiss")


async def load_items(redis: Redis, rng: np.random.Generator) -> None:
    vectors = rng.standard_normal((ITEMS, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    async with redis.pipeline(transaction=False) as pipe:
        for i in range(ITEMS):
            pipe.set(keys.item_vector(f"it-{i}"), pack_vector(vectors[i]))
        await pipe.execute()


async def append_events(redis: Redis, n: int, prefix: str, rng: np.random.Generator) -> None:
    users = rng.integers(0, USERS, n)
    items = rng.integers(0, ITEMS, n)
    actions = rng.integers(0, len(ACTIONS), n)
    ms = int(NOW * 1000)
    for start in range(0, n, 5000):
        async with redis.pipeline(transaction=False) as pipe:
            for k in range(start, min(n, start + 5000)):
                user = f"{prefix}-{users[k]}"
                event = FeedbackEvent(
                    f"{prefix}-ix-{k}", user, f"it-{items[k]}", ACTIONS[actions[k]], ms, ms
                )
                stream = keys.events_stream(keys.partition_of(user, PARTITIONS))
                pipe.xadd(stream, {"e": encode_event(event)})
            await pipe.execute()


async def run_worker(redis: Redis, batch_size: int, n: int) -> float:
    worker = EmbeddingWorker(
        redis,
        partitions=PARTITIONS,
        dim=DIM,
        consumer=f"bench-{batch_size}",
        clock=lambda: NOW,
        block_ms=10,
        batch_size=batch_size,
        max_wait_ms=0,
    )
    started = time.perf_counter()
    while await worker.poll(">") > 0:
        pass
    elapsed = time.perf_counter() - started
    handled = worker.stats.entries
    if handled != n:
        raise RuntimeError(f"worker handled {handled} of {n} events")
    return n / elapsed


async def naive_apply(redis: Redis, cas: Any, raw: bytes) -> None:
    """Algorithm 1 for one event: read, compute, compare-and-set."""
    event = decode_event(raw)
    user = event.user_id
    async with redis.pipeline(transaction=False) as pipe:
        pipe.get(keys.user_state(user))
        pipe.get(keys.user_embedding(user))
        pipe.get(keys.item_vector(event.item_id))
        raw_state, raw_embedding, raw_item = await pipe.execute()
    state = decode_state(raw_state, DIM)
    ix = interaction_hash(event.interaction_id)
    if not state.applied(ix) and raw_item is not None:
        current = unpack_vector(raw_embedding, DIM) if raw_embedding else None
        age_hours = max(0.0, NOW - event.timestamp_ms / 1000) / 3600
        updated = update_embedding(
            EmbeddingState(current, state.momentum, state.version),
            unpack_vector(raw_item, DIM),
            event.action,
            age_hours,
        )
        if updated is not None and updated.embedding is not None:
            new_state = WorkerState(
                updated.version, int(NOW * 1000), updated.momentum, state.with_applied([ix])
            )
            await cas(
                keys=[keys.user_embedding(user), keys.user_state(user)],
                args=[
                    pack_half(updated.embedding),
                    encode_state(new_state, DIM),
                    state.version,
                ],
            )


async def run_naive(redis: Redis, n: int) -> float:
    """Algorithm 1 one event at a time: read, compute, compare-and-set, acknowledge."""
    cas = redis.register_script(CAS_WRITE)
    streams: dict[Any, Any] = dict.fromkeys(keys.events_streams(PARTITIONS), ">")
    started = time.perf_counter()
    done = 0
    while True:
        reply = cast(
            StreamReply,
            await redis.xreadgroup(keys.EMBEDDER_GROUP, "naive", streams, count=1),
        )
        if not reply:
            break
        for stream, entries in reply:
            for entry_id, fields in entries:
                assert fields is not None
                await naive_apply(redis, cas, fields[b"e"])
                await redis.xack(stream, keys.EMBEDDER_GROUP, entry_id)
                done += 1
    elapsed = time.perf_counter() - started
    if done != n:
        raise RuntimeError(f"naive path handled {done} of {n} events")
    return n / elapsed


def start_workers(url: str, n: int) -> list[subprocess.Popen[bytes]]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PERSO_")},
        "REDIS_URL": url,
        "PERSO_EMBEDDING_DIM": str(DIM),
        "PERSO_EVENT_PARTITIONS": str(PARTITIONS),
        "PERSO_WORKER_BATCH_SIZE": "1000",
        "PERSO_WORKER_MAX_WAIT_MS": "0",
        "PERSO_FRESHNESS_ACTIVE_S": "0",
        "PERSO_FRESHNESS_CASUAL_S": "0",
        "PERSO_LOG_LEVEL": "warning",
    }
    argv = [sys.executable, "-m", "perso", "worker", "--count", str(n), "--consumer", "proc"]
    return [subprocess.Popen(argv, env=env)]


def stop_workers(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        process.wait(timeout=30)


async def outstanding(redis: Redis) -> int:
    total = 0
    for stream in keys.events_streams(PARTITIONS):
        info = await redis.xinfo_stream(stream)
        for group in await redis.xinfo_groups(stream):
            total += int(group["pending"])
            total += int(group["last-delivered-id"] != info["last-generated-id"])
    return total


async def run_processes(redis: Redis, url: str, n: int, events: int) -> float:
    """``perso worker --count n`` draining the backlog."""
    processes = start_workers(url, n)
    try:
        started = time.perf_counter()
        for _ in range(100_000):
            if await outstanding(redis) == 0:
                break
            await asyncio.sleep(0.02)
        return events / (time.perf_counter() - started)
    finally:
        stop_workers(processes)


async def bytes_per_user(redis: Redis, dim: int) -> int:
    user = f"full-{dim}"
    embedding = np.ones(dim, np.float32) / math.sqrt(dim)
    state = WorkerState(50, int(NOW * 1000), embedding, tuple(range(1, 51)))
    await redis.set(keys.user_embedding(user), pack_half(embedding))
    await redis.set(keys.user_state(user), encode_state(state, dim))
    total = 0
    for key in (keys.user_embedding(user), keys.user_state(user)):
        total += int(await redis.memory_usage(key) or 0)
    return total


async def run(events: int) -> None:
    threadpool_limits(limits=1, user_api="blas")
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp), persistent=False).start()
        redis = Redis.from_url(server.url)
        try:
            print(f"machine: {machine()}")
            await load_items(redis, rng)
            await ensure_groups(redis, PARTITIONS)
            figures: dict[str, float] = {}
            for batch_size in (100, 1000):
                await redis.delete(*keys.events_streams(PARTITIONS))
                await ensure_groups(redis, PARTITIONS)
                await append_events(redis, events, f"b{batch_size}", rng)
                rate = await run_worker(redis, batch_size, events)
                figures[f"events_per_s_batch_{batch_size}"] = rate
                print(f"worker, batches of {batch_size:>4}: {rate:10,.0f} events/s ({events:,})")
            await redis.delete(*keys.events_streams(PARTITIONS))
            await ensure_groups(redis, PARTITIONS)
            await append_events(redis, events, "procs", rng)
            two = await run_processes(redis, server.url, 2, events)
            print(f"perso worker --count 2:      {two:10,.0f} events/s ({events:,}, with start-up)")
            await redis.delete(*keys.events_streams(PARTITIONS))
            await ensure_groups(redis, PARTITIONS)
            await append_events(redis, NAIVE_EVENTS, "naive", rng)
            naive = await run_naive(redis, NAIVE_EVENTS)
            print(f"naive, one event at a time:  {naive:10,.0f} events/s ({NAIVE_EVENTS:,})")
            size = await bytes_per_user(redis, DIM)
            size_512 = await bytes_per_user(redis, 512)
            print(
                f"Redis memory per user (embedding + state, full window): {size} B at "
                f"dim {DIM}, {size_512} B at dim 512 (seed 000: 3.2 KB at 512)"
            )
        finally:
            await redis.aclose()
            server.stop()
    best = max(figures.values())
    finish(
        {
            "events_per_s": round(best),
            "events_per_s_batch_100": round(figures["events_per_s_batch_100"]),
            "events_per_s_batch_1000": round(figures["events_per_s_batch_1000"]),
            "events_per_s_two_processes": round(two),
            "naive_events_per_s": round(naive),
            "speedup_vs_naive": round(best / naive, 1),
            "bytes_per_user": size,
            "bytes_per_user_dim_512": size_512,
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000, help="backlog size (200000)")
    args = parser.parse_args()
    asyncio.run(run(args.events))


if __name__ == "__main__":
    main()
