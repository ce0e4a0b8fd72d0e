"""Events per second through the stream worker, against a naive one-event-at-a-time
update, and the Redis memory of one user's record.

Both paths run in this process against the same embedded Redis on this machine
(the worker and Redis share the 2 cores): a backlog of feedback events is appended to the
``events:{p}`` streams, then drained through the consumer group:

- the worker (``origin.worker.consumer``) on **the production mix**: every slate served
  logged as a decision (10 items shown, one decision-log entry each) and reported on by
  two feedback events that name its ``request_id`` and the item's position (views, clicks,
  carts, purchases, dismisses as below), so that the decisions open joins, the events
  convert impressions, and every join closes when its reward window is over (the worker's
  clock moved past it once the streams are drained: the closes' time counts). Measured with
  the shipped 100-entry batches (``PERSO_WORKER_BATCH_SIZE``, the headline) and with
  1,000-entry batches (what a worker could do with a backlog), each reported;
- the worker on events alone (no decisions, no joins: what it measured before issue 31),
  each batch size, for comparison;
- ``perso worker --count 2``: two worker processes under the pool supervisor;
- the naive path: per event, read the user's record and the item, apply the same model
  update, write with the same compare-and-set script, acknowledge.

Views change no model on their own (they count once the slate's decision closes), so the
worker only reads them. ``bytes_per_user``: ``MEMORY USAGE`` of a user's record (model mean
and variance, window of 50 observations) at the default dimension (128), and at 512 (seed
000's dimension, where it measured 3.2 KB per user for an embedding alone).

Events per second counts the feedback events; the decisions and the closes are work on
top of them (``decisions``, ``closes`` in the JSON). Run:
``.venv/bin/python -m benchmarks.stream_worker [--events 200000]``
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from benchmarks.report import finish, machine
from origin.event_streams.streams import StreamReply, ensure_groups
from origin.learned.posteriors import PosteriorConfig, PosteriorStore
from origin.learned.user_models import (
    WINDOW,
    UserRecord,
    decode_record,
    encode_record,
    observation_hash,
)
from origin.worker.batch import CAS_WRITE
from origin.worker.consumer import StreamWorker
from origin.worker.joins import JoinConfig
from perso.redis_server import RedisServer
from protocol import keys
from protocol.audience import USER
from protocol.decisions import DECISION_FIELD, encode_fields
from protocol.events import FeedbackEvent, decode_event, encode_event
from protocol.vectors import pack_vector, unpack_vector
from redis_client.client import RedisClient, connect
from relevance.normal import ppf
from relevance.user_model import PRIOR_SCALE, UserModel, relaxed, updated

DIM = 128
PARTITIONS = 8
ITEMS = 20_000
USERS = 20_000
NAIVE_EVENTS = 5_000
NOW = 1_767_225_600.0
ACTIONS = ("view", "view", "view", "click", "click", "add_to_cart", "purchase", "dismiss")
ENGAGED = ("click", "add_to_cart", "purchase")
SHOWN = 10  # items a slate shows
EVENTS_PER_SLATE = 2
SHIPPED_BATCH = 100  # PERSO_WORKER_BATCH_SIZE's default


async def load_items(redis: RedisClient, rng: np.random.Generator) -> None:
    vectors = rng.standard_normal((ITEMS, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    async with redis.pipeline(transaction=False) as pipe:
        for i in range(ITEMS):
            pipe.set(keys.item_vector(f"it-{i}"), pack_vector(vectors[i]))
        await pipe.execute()


async def append_events(redis: RedisClient, n: int, prefix: str, rng: np.random.Generator) -> None:
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


async def append_slates(redis: RedisClient, n: int, prefix: str, rng: np.random.Generator) -> int:
    """``n`` feedback events, ``EVENTS_PER_SLATE`` per slate, each naming its slate's
    decision (logged first, ``SHOWN`` items) and the item's position in it; the number of
    decisions."""
    slates = n // EVENTS_PER_SLATE
    ms = int(NOW * 1000)
    for start in range(0, slates, 2000):
        async with redis.pipeline(transaction=False) as pipe:
            for k in range(start, min(slates, start + 2000)):
                user = f"{prefix}-{int(rng.integers(0, USERS))}"
                partition = keys.partition_of(user, PARTITIONS)
                items = [f"it-{int(i)}" for i in rng.choice(ITEMS, SHOWN, replace=False)]
                request_id = f"{prefix}-r-{k}"
                record = encode_fields(
                    request_id=request_id,
                    user_id=user,
                    audience=USER,
                    context="mobile_evening",
                    page="home",
                    at_ms=ms,
                    served_by="edge",
                    policy="configured",
                    policy_version="1",
                    model_version="bench",
                    shown=[[item, pos + 1, 0.5, 0.2] for pos, item in enumerate(items)],
                )
                pipe.xadd(keys.decisions_stream(partition), {DECISION_FIELD: record})
                for e in range(EVENTS_PER_SLATE):
                    pos = int(rng.integers(0, SHOWN))
                    event = FeedbackEvent(
                        f"{prefix}-ix-{k}-{e}",
                        user,
                        items[pos],
                        ACTIONS[int(rng.integers(0, len(ACTIONS)))],
                        ms,
                        ms,
                        request_id=request_id,
                        position=pos + 1,
                    )
                    pipe.xadd(keys.events_stream(partition), {"e": encode_event(event)})
            await pipe.execute()
    return slates


@dataclass
class Drained:
    events_per_s: float
    seconds: float
    closes: int
    closing_s: float = 0.0  # of ``seconds``: closing the joins once the streams were read


async def run_worker(redis: RedisClient, batch_size: int, n: int, decisions: int = 0) -> Drained:
    """Drain ``n`` events and ``decisions`` decisions through one worker, then close every
    join (the clock moved past the reward window); events/s over all of it."""
    now = [NOW]
    worker = StreamWorker(
        redis,
        partitions=PARTITIONS,
        dim=DIM,
        consumer=f"bench-{batch_size}-{decisions}",
        clock=lambda: now[0],
        block_ms=10,
        batch_size=batch_size,
        max_wait_ms=0,
    )
    started = time.perf_counter()
    while await worker.poll(">") > 0:
        pass
    closes = 0
    read_at = time.perf_counter()
    if decisions:
        now[0] = NOW + JoinConfig().wait_s + 1
        while (closed := await worker.joins.close_due(int(now[0] * 1000))) > 0:
            closes += closed
    elapsed = time.perf_counter() - started
    handled = worker.stats.entries
    if handled != n + decisions:
        raise RuntimeError(f"worker handled {handled} of {n} events and {decisions} decisions")
    if closes != decisions:
        raise RuntimeError(f"{closes} joins closed of {decisions}")
    return Drained(n / elapsed, elapsed, closes, time.perf_counter() - read_at)


async def naive_apply(redis: RedisClient, cas: Any, posteriors: PosteriorStore, raw: bytes) -> None:
    """One event: read the record, the item and its posterior, update the model, and
    compare-and-set: the worker's steps for one event."""
    event = decode_event(raw)
    engaged = event.action in ENGAGED
    if not engaged and event.action != "dismiss":
        return  # a view moves nothing on its own
    user = event.user_id
    async with redis.pipeline(transaction=False) as pipe:
        pipe.get(keys.user_record(user))
        pipe.get(keys.item_vector(event.item_id))
        raw_record, raw_item = await pipe.execute()
    record = decode_record(raw_record, DIM)
    ix = observation_hash(event.interaction_id)
    if record.applied(ix) or raw_item is None:
        return
    baseline = ppf(await posteriors.rates([event.item_id], NOW * 1000))
    prior_var = PRIOR_SCALE / DIM
    model = record.model or UserModel.prior(DIM)
    model = relaxed(model, NOW - record.updated_ms / 1000, prior_var, 7 * 86_400.0)
    model = updated(
        model,
        unpack_vector(raw_item, DIM)[None, :],
        baseline,
        np.array([engaged]),
        np.array([1.0]),
        prior_var=prior_var,
    )
    new = UserRecord(
        version=record.version + 1,
        updated_ms=int(NOW * 1000),
        model=model,
        window=record.with_applied([ix]),
    )
    await cas(keys=[keys.user_record(user)], args=[encode_record(new, DIM), record.version])


async def run_naive(redis: RedisClient, n: int) -> float:
    """Algorithm 1 one event at a time: read, compute, compare-and-set, acknowledge."""
    cas = redis.register_script(CAS_WRITE)
    posteriors = PosteriorStore(redis, PosteriorConfig())
    streams: dict[Any, Any] = dict.fromkeys(keys.events_streams(PARTITIONS), ">")
    started = time.perf_counter()
    done = 0
    while True:
        reply = cast(
            StreamReply,
            await redis.xreadgroup(keys.WORKER_GROUP, "naive", streams, count=1),
        )
        if not reply:
            break
        for stream, entries in reply:
            for entry_id, fields in entries:
                assert fields is not None
                await naive_apply(redis, cas, posteriors, fields[b"e"])
                await redis.xack(stream, keys.WORKER_GROUP, entry_id)
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


async def outstanding(redis: RedisClient) -> int:
    """Entries not yet read or acknowledged in the event and decision streams, and joins
    not yet closed."""
    total = 0
    for stream in (*keys.events_streams(PARTITIONS), *keys.decisions_streams(PARTITIONS)):
        info = await redis.xinfo_stream(stream)
        for group in await redis.xinfo_groups(stream):
            total += int(group["pending"])
            total += int(group["last-delivered-id"] != info["last-generated-id"])
    for p in range(PARTITIONS):
        total += int(await redis.zcard(keys.decisions_due(p)))
    return total


async def run_processes(redis: RedisClient, url: str, n: int, events: int) -> float:
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


async def bytes_per_user(redis: RedisClient, dim: int) -> int:
    user = f"full-{dim}"
    model = UserModel(np.ones(dim, np.float32) / math.sqrt(dim), np.full(dim, 0.5 / dim))
    record = UserRecord(50, int(NOW * 1000), model, tuple(range(1, WINDOW + 1)))
    await redis.set(keys.user_record(user), encode_record(record, dim))
    return int(await redis.memory_usage(keys.user_record(user)) or 0)


async def run(events: int) -> None:
    threadpool_limits(limits=1, user_api="blas")
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp), persistent=False).start()
        redis = connect(server.url)
        try:
            print(f"machine: {machine()}")
            await load_items(redis, rng)
            await ensure_groups(redis, PARTITIONS)
            figures: dict[str, float] = {}
            for batch_size in (SHIPPED_BATCH, 1000):
                await fresh_streams(redis)
                slates = await append_slates(redis, events, f"m{batch_size}", rng)
                mix = await run_worker(redis, batch_size, events, slates)
                figures[f"mix_batch_{batch_size}"] = mix.events_per_s
                figures[f"mix_closing_s_batch_{batch_size}"] = mix.closing_s
                print(
                    f"worker, production mix, batches of {batch_size:>4}: "
                    f"{mix.events_per_s:10,.0f} events/s ({events:,} events, {slates:,} "
                    f"decisions and their {mix.closes:,} closes, {mix.seconds:.1f} s, of which "
                    f"{mix.closing_s:.1f} s closing)"
                )
            for batch_size in (SHIPPED_BATCH, 1000):
                await fresh_streams(redis)
                await append_events(redis, events, f"b{batch_size}", rng)
                alone = await run_worker(redis, batch_size, events)
                figures[f"events_alone_batch_{batch_size}"] = alone.events_per_s
                print(
                    f"worker, events alone,    batches of {batch_size:>4}: "
                    f"{alone.events_per_s:10,.0f} events/s ({events:,})"
                )
            await fresh_streams(redis)
            await append_slates(redis, events, "procs", rng)
            two = await run_processes(redis, server.url, 2, events)
            print(
                f"perso worker --count 2, production mix: {two:10,.0f} events/s ({events:,}, "
                "with start-up; the decisions' joins close as they come, on the real clock)"
            )
            await fresh_streams(redis)
            await append_events(redis, NAIVE_EVENTS, "naive", rng)
            naive = await run_naive(redis, NAIVE_EVENTS)
            print(f"naive, one event at a time:  {naive:10,.0f} events/s ({NAIVE_EVENTS:,})")
            size = await bytes_per_user(redis, DIM)
            size_512 = await bytes_per_user(redis, 512)
            print(
                f"Redis memory per user (model and window of {WINDOW}): {size} B at "
                f"dim {DIM}, {size_512} B at dim 512 (seed 000: 3.2 KB at 512, embedding alone)"
            )
        finally:
            await redis.aclose()
            server.stop()
    headline = figures[f"mix_batch_{SHIPPED_BATCH}"]
    finish(
        {
            "events_per_s": round(headline),  # the production mix, the shipped batch size
            **{name: round(value, 1) for name, value in figures.items()},
            "events_per_s_two_processes": round(two),
            "naive_events_per_s": round(naive),
            "speedup_vs_naive": round(headline / naive, 1),
            "bytes_per_user": size,
            "bytes_per_user_dim_512": size_512,
        }
    )


async def fresh_streams(redis: RedisClient) -> None:
    """Empty event and decision streams, their consumer groups made again."""
    await redis.delete(*keys.events_streams(PARTITIONS), *keys.decisions_streams(PARTITIONS))
    await ensure_groups(redis, PARTITIONS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000, help="backlog size (200000)")
    args = parser.parse_args()
    asyncio.run(run(args.events))


if __name__ == "__main__":
    main()
