"""benchmarks.cluster_throughput: the same work on a Redis Cluster and on one Redis node, in
the same run, side by side (issue 20: cluster mode at least 0.85x one node).

For each of the two (a ``redis-server`` started here, then a cluster of three primaries with
a replica each from the same binary, ``perso.redis_cluster``):

- **worker events/s**: one stream worker (``origin.worker.consumer``, in this process, the
  code ``perso worker`` runs) drains a backlog of feedback events (``benchmarks.
  stream_worker``'s: 20K users over 8 partitions, 3 in 8 views), in 1,000-event batches.
  On the cluster every batch is acknowledged past a replication barrier on every primary
  (``PERSO_REDIS_WAIT_REPLICAS=1``, as ``perso up --redis cluster`` runs it).
- **origin fills/s**: ``POST /v1/personalize`` at the origin (its own process, a 2,000-item
  catalog), 8 concurrent clients, users with models in Redis: each request reads the
  user's state and the candidates' posteriors there.
- **feedback acknowledgement**: the intake's append (``origin.event_streams.event_log``: the
  Lua script that appends and deduplicates), one at a time, p50 and p99; on the cluster
  also with ``WAIT`` for the partition's replica (``PERSO_REDIS_WAIT_REPLICAS=1``): what
  acknowledging only replicated feedback costs.
- **edge hits/s**: one edge process whose entries live in the same Redis (a PoP store,
  ``PERSO_EDGE_STORE=redis``: each hit reads its entry there), 256 users' cached answers in
  turn, driven by wrk on the other core (``make bench-tools``); without wrk, null.

    .venv/bin/python -m benchmarks.cluster_throughput [--events 50000] [--seconds 10]

Last line: JSON with each figure on both, and ``ratio_*`` (cluster / node).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from pydantic import SecretStr

from benchmarks.bench_processes import find_edge_pid, tool
from benchmarks.edge_hit import capture_hit
from benchmarks.origin_latency import prepare_users, request_body
from benchmarks.report import finish, machine, percentile
from benchmarks.stream_worker import PARTITIONS, append_events, load_items
from benchmarks.wrk_load import mint_users, run_wrk, wrk_script
from config.settings import Settings
from origin.event_streams.event_log import FeedbackLog
from origin.event_streams.streams import ensure_groups
from origin.worker.consumer import StreamWorker
from perso.redis_cluster import RedisCluster
from perso.redis_server import RedisServer
from perso.stack import Stack
from protocol.events import FeedbackEvent
from redis_client.address import is_cluster
from redis_client.client import RedisClient, is_cluster_client, open_client
from redis_client.durable import Durability

DIM = 128
CONCURRENCY = 8
IDENTITY_KEY = "cluster-throughput-identity-key-01"
CATALOG = 2000
EDGE_USERS = 256


async def worker_rate(url: str, events: int) -> float:
    """Events per second one worker drains a backlog of ``events`` at."""
    redis = await open_client(url, socket_timeout=10.0)
    try:
        await redis.flushall()
        rng = np.random.default_rng(7)
        await load_items(redis, rng)
        await ensure_groups(redis, PARTITIONS)
        await append_events(redis, events, "tp", rng)
        cluster = is_cluster_client(redis)
        worker = StreamWorker(
            redis,
            partitions=PARTITIONS,
            dim=DIM,
            consumer="throughput",
            clock=time.time,
            block_ms=10,
            batch_size=1000,
            max_wait_ms=0,
            durability=Durability(replicas=1, timeout_ms=1000) if cluster else Durability(),
        )
        started = time.perf_counter()
        while await worker.poll(">") > 0:
            pass
        elapsed = time.perf_counter() - started
        if worker.stats.entries != events:
            raise RuntimeError(f"the worker handled {worker.stats.entries} of {events} events")
        return events / elapsed
    finally:
        await redis.flushall()
        await redis.aclose()


async def append_latency(url: str, durability: Durability, n: int = 2000) -> tuple[float, float]:
    """p50 and p99 (ms) of appending one click through the feedback intake."""
    redis = await open_client(url, socket_timeout=5.0)
    log = FeedbackLog(
        redis, partitions=PARTITIONS, dedup_ttl_s=600, clock=time.time, durability=durability
    )
    ms = int(time.time() * 1000)
    took: list[float] = []
    try:
        for k in range(n):
            user = f"ack-{k % 500}"
            event = FeedbackEvent(
                f"ack-ix-{k}-{durability.replicas}", user, "it-1", "click", ms, ms
            )
            started = time.perf_counter()
            await log.append(user, [event])
            took.append((time.perf_counter() - started) * 1000)
    finally:
        await redis.aclose()
    return percentile(took, 50), percentile(took, 99)


async def origin_rate(origin_url: str, token: str, redis: RedisClient, seconds: float) -> float:
    """Personalize requests per second at the origin from ``CONCURRENCY`` clients, over
    ``benchmarks.origin_latency``'s users (cold, with a model, with a model and a session)
    and request mix."""
    async with httpx.AsyncClient(
        base_url=origin_url,
        headers={"authorization": f"Bearer {token}"},
        timeout=10.0,
        limits=httpx.Limits(max_connections=CONCURRENCY),
    ) as client:
        users = await prepare_users(redis, client, CATALOG, DIM, np.random.default_rng(11))

        async def loop(seed: int, until: float) -> int:
            rng, done = np.random.default_rng(seed), 0
            while time.perf_counter() < until:
                answer = await client.post(
                    "/v1/personalize", json=request_body(rng, str(rng.choice(users)))
                )
                answer.raise_for_status()
                done += 1
            return done

        await loop(0, time.perf_counter() + 1.0)  # warm
        started = time.perf_counter()
        until = started + seconds
        done = await asyncio.gather(*(loop(seed, until) for seed in range(CONCURRENCY)))
        return sum(done) / (time.perf_counter() - started)


def edge_rate(edge_url: str, root: Path, seconds: int) -> float | None:
    """Hits per second at the edge (wrk, 32 connections); None without wrk."""
    wrk = tool("wrk")
    if wrk is None:
        return None
    port = int(edge_url.rsplit(":", 1)[1])
    users = mint_users(IDENTITY_KEY, EDGE_USERS)
    capture_hit(port, users[0])  # the users' shared entry, filled and hit
    script = root / "hits.lua"
    script.write_text(wrk_script(users))
    server = [find_edge_pid(port)]
    run_wrk(wrk, script, port, seconds=2, connections=32, server=server)  # warm
    return run_wrk(wrk, script, port, seconds=seconds, connections=32, server=server).rps


async def stack_rates(url: str, root: Path, seconds: float) -> dict[str, float | None]:
    token = secrets.token_urlsafe(16)
    settings = Settings(
        redis_url=url,
        data_dir=root,
        catalog_size=CATALOG,
        embedding_dim=DIM,
        text_encoder="hashing",
        workers=0,
        regions=("bench",),
        origin_token=SecretStr(token),
        identity_keys=SecretStr(IDENTITY_KEY),
        edge_store="redis",
        edge_store_url=url,
        log_level="warning",
    )
    async with Stack(settings, free_ports=True, say=lambda line: print(f"  {line}")) as ends:
        redis = await open_client(url)
        try:
            origin = await origin_rate(ends.origin_url, token, redis, seconds)
        finally:
            await redis.aclose()
        edge = await asyncio.to_thread(edge_rate, ends.edges["bench"], root, int(seconds))
    return {"origin_fills_per_s": origin, "edge_hits_per_s": edge}


async def measure(url: str, root: Path, events: int, seconds: float) -> dict[str, float | None]:
    eps = await worker_rate(url, events)
    print(f"  worker: {eps:,.0f} events/s")
    ack: dict[str, float | None] = {}
    ack["ack_p50_ms"], ack["ack_p99_ms"] = await append_latency(url, Durability())
    ack["ack_wait_p50_ms"] = ack["ack_wait_p99_ms"] = None
    if is_cluster(url):
        waited = await append_latency(url, Durability(replicas=1, timeout_ms=1000))
        ack["ack_wait_p50_ms"], ack["ack_wait_p99_ms"] = waited
    print(f"  feedback append: {ack}")
    rates = await stack_rates(url, root, seconds)
    print(f"  origin: {rates['origin_fills_per_s']:,.0f} fills/s; edge: {rates['edge_hits_per_s']}")
    return {"worker_events_per_s": eps, **ack, **rates}


def ratio(cluster: float | None, node: float | None) -> float | None:
    return None if cluster is None or not node else round(cluster / node, 3)


async def run(args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="cluster-throughput-") as tmp:
        root = Path(tmp)
        print("== one node ==")
        with RedisServer(root / "node", persistent=False) as server:
            node = await measure(server.url, root / "node-stack", args.events, args.seconds)
        print("== cluster: 3 primaries, a replica each ==")
        with RedisCluster(root / "cluster") as cluster:
            on_cluster = await measure(
                cluster.url, root / "cluster-stack", args.events, args.seconds
            )
    out: dict[str, Any] = {}
    for name in ("worker_events_per_s", "origin_fills_per_s", "edge_hits_per_s"):
        out[f"node_{name}"] = node[name]
        out[f"cluster_{name}"] = on_cluster[name]
        out[f"ratio_{name}"] = ratio(on_cluster[name], node[name])
        print(
            f"{name}: node {node[name]}, cluster {on_cluster[name]}, ratio {out[f'ratio_{name}']}"
        )
    finish(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
