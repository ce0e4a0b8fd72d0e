"""benchmarks.failover: steady load through the edges of a stack on a Redis Cluster while a
Redis primary, then an origin, then a stream worker, then one edge process of a PoP are
killed (SIGKILL), one at a time; what the clients saw, and whether any acknowledged
feedback was lost or refused.

The stack is ``perso up --redis cluster``'s (``perso.stack``): an embedded Redis Cluster of
three primaries with two replicas each (``--replicas``; node timeout 1 s), every node,
origin, worker and edge supervised (a killed child is restarted after its back-off);
feedback acknowledged only once one of the partition's replicas has it
(``PERSO_REDIS_WAIT_REPLICAS=1``), and a worker's batch acknowledged only past a
replication barrier on every primary; two regions of two edge processes each (one PoP
per region, sharing its store in the stack's Redis), two workers, freshness tiers off,
and two origins (the catalog origin and a catalog replica; every edge calls both). The
browsers are ``benchmarks.fault_load``'s: each request to a process of its region's PoP at
random, to the other when one refuses the connection (a PoP's load balancer); clicks
resent unchanged after ``Retry-After`` or no answer until acknowledged; a 202, held at the
edge while no origin could take it, is an acknowledgement, and the run waits for the
edges to hand on what they held.

- **Redis primary**: the primary holding events partition 0 is killed. ``recovery_s`` is
  the time until a write to a key of its slots succeeds again through a cluster client
  (the cluster promoted the replica and the client followed the new layout). The
  supervisor restarts the killed node, which rejoins as a replica.
- **Origin**: the catalog origin is killed; the edges eject it and send everything to the
  replica meanwhile; back when a new process answers.
- **Worker**: killed; back when a new process runs (the other worker goes on).
- **Edge process**: the second process of the first region's PoP is killed; the browsers'
  requests go to the other one meanwhile; back when a new process answers (it adopts the
  feedback its predecessor held on disk, ``edge.origins.feedback_spool``).

Then the load stops, the workers drain, and every acknowledged click is looked up in its
user's applied window: ``acked_lost`` counts acknowledged clicks never applied.

    .venv/bin/python -m benchmarks.failover [--users 300] [--concurrency 8] [--settle 10]
        [--replicas 2] [--out DIR]

``failover.json`` (with the p99 per second) and ``failover.png`` (the p99 per second, each
failure shaded from the kill to service back) go to ``--out`` (default
``.perso/bench/failover``).

No baseline: the figures are absolute. Last line: JSON with ``acked_lost``, ``edge_5xx``,
``recovery_s`` (per victim) and the p99 during and after each failure.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from redis.exceptions import RedisError

from benchmarks.fault_load import Browsers, Tally, ready, stack_settings, verify
from benchmarks.report import machine, percentile, results_dir, save_and_finish
from perso import plots
from perso.redis_cluster import RedisCluster
from perso.stack import Stack
from perso.stack_endpoints import Endpoints
from protocol import keys
from redis_client.client import RedisClient, node_of, open_client

REGIONS = ("us-east", "eu-west")
EDGES_PER_POP = 2
DIM = 32
WARMUP_S = 8.0
BACK_IN_S = 90.0
PROBE_EVERY_S = 0.05


async def kill_primary(stack: Stack, cluster: RedisCluster, ends: Endpoints) -> float:
    """SIGKILL the primary of events partition 0; seconds until a write to its slot
    succeeds again."""
    probe = await open_client(ends.redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
    try:
        key = keys.events_accepted(0)  # partition 0's slot
        await probe.get(key)  # learn the layout
        holder = node_of(probe, key)
        if holder is None:
            raise RuntimeError(f"{ends.redis_url} is not a cluster")
        [n] = [i for i, node in enumerate(cluster.nodes) if node.port == int(holder.port)]
        process = stack.processes()[f"redis-{n}"]
        assert process.child is not None
        killed_at = time.monotonic()
        os.kill(process.child.pid, signal.SIGKILL)
        while time.monotonic() - killed_at < BACK_IN_S:
            try:
                await probe.set(keys.replication_barrier("failover-probe"), b"1")
                await probe.incrby(key, 0)
                return time.monotonic() - killed_at
            except RedisError:
                await asyncio.sleep(PROBE_EVERY_S)
        raise RuntimeError("the cluster did not serve writes again in time")
    finally:
        await probe.aclose()


async def kill_process(stack: Stack, ends: Endpoints, name: str) -> float:
    """SIGKILL ``name``; seconds until a new process of it is running (and answering,
    for a server)."""
    process = stack.processes()[name]
    assert process.child is not None, f"{name} is not running"
    old = process.child.pid
    killed_at = time.monotonic()
    os.kill(old, signal.SIGKILL)
    names = stack.origin_names()
    url = ends.origin_urls[names.index(name)] if name in names else edge_url(ends, name)
    while time.monotonic() - killed_at < BACK_IN_S:
        await asyncio.sleep(0.1)
        child = process.child
        if child is None or child.pid == old:
            continue
        if url is None or await ready(url, ends.redis_url):
            return time.monotonic() - killed_at
    raise RuntimeError(f"{name} did not come back within {BACK_IN_S} s")


def edge_url(ends: Endpoints, name: str) -> str | None:
    """The URL of edge process ``name`` (``edge-<region>-<n>``); None for another process."""
    for region, urls in ends.edge_urls.items():
        for n, url in enumerate(urls):
            if name == f"edge-{region}-{n}":
                return url
    return None


def p99_between(tally: Tally, start: float, end: float) -> float:
    samples = [ms for at, ms in tally.latencies_ms if start <= at < end]
    return round(percentile(samples, 99), 1) if samples else float("nan")


def p99_per_interval(
    latencies_ms: list[tuple[float, float]], every_s: float
) -> list[tuple[float, float]]:
    """``(interval start s, p99 ms)`` of the requests started in each interval that has
    any, in time order."""
    by_interval: dict[int, list[float]] = {}
    for at, ms in latencies_ms:
        by_interval.setdefault(int(at // every_s), []).append(ms)
    return [
        (index * every_s, round(percentile(samples, 99), 1))
        for index, samples in sorted(by_interval.items())
    ]


def plot(
    path: Path, series: list[tuple[float, float]], windows: dict[str, tuple[float, float, float]]
) -> None:
    """The p99 per second over the run, each failure shaded from the kill to service back."""
    with plots.figure(
        path, "Failover: p99 latency through the edges while processes are killed (ms)", width=10
    ) as [ax]:
        # each second's p99 drawn at its middle
        ax.plot(
            [t + 0.5 for t, _ in series], [v for _, v in series], color="black", label="p99, 1 s"
        )
        for n, (victim, (killed, back, _)) in enumerate(windows.items()):
            ax.axvspan(
                killed,
                max(back, killed + 0.3),
                color=f"C{n}",
                alpha=0.3,
                label=(f"{victim} killed, back after {back - killed:.1f} s"),
            )
            ax.axvline(killed, color=f"C{n}", linewidth=1)
        plots.log_scale(ax, "y")
        plots.labelled(
            ax, "", "seconds since the load started", "p99 of the requests in each second, ms"
        )


async def kill_each(
    stack: Stack,
    cluster: RedisCluster,
    ends: Endpoints,
    tally: Tally,
    *,
    started: float,
    settle_s: float,
) -> tuple[dict[str, float], dict[str, tuple[float, float, float]]]:
    """Kill each victim in turn, ``settle_s`` after the last came back; each one's seconds
    to recover, and (killed, back, settled) in seconds since ``started``."""
    recovery: dict[str, float] = {}
    windows: dict[str, tuple[float, float, float]] = {}
    edge = f"edge-{REGIONS[0]}-1"
    for victim in ("redis-primary", stack.origin_names()[0], "worker-0", edge):
        tally.phase = victim
        killed = time.monotonic() - started
        if victim == "redis-primary":
            took = await kill_primary(stack, cluster, ends)
        else:
            took = await kill_process(stack, ends, victim)
        recovery[victim] = round(took, 2)
        print(f"  {victim} killed, serving again after {took:.2f} s")
        await asyncio.sleep(settle_s)
        windows[victim] = (killed, killed + took, time.monotonic() - started)
    return recovery, windows


async def run(args: argparse.Namespace) -> None:
    begun = time.perf_counter()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="failover-") as tmp:
        data_dir = Path(args.keep) if args.keep else Path(tmp)
        print(f"data and logs in {data_dir}")
        settings = stack_settings(data_dir, REGIONS, DIM, "failover")
        stack = Stack(
            settings,
            free_ports=True,
            say=lambda line: print(f"  {line}"),
            redis="cluster",
            origins=2,
            edges_per_region=EDGES_PER_POP,
            cluster_replicas=args.replicas,
        )
        tally = Tally()
        stop_supervising = asyncio.Event()
        async with stack as ends:
            cluster = stack.redis_cluster
            assert cluster is not None
            supervisor = asyncio.create_task(stack.supervise(stop_supervising, poll_s=0.2))
            browsers = Browsers(ends, args.users, tally, args.seed)
            limits = httpx.Limits(max_connections=64)
            async with httpx.AsyncClient(timeout=5.0, limits=limits) as client:
                await browsers.tokens(client)
                stop = asyncio.Event()
                loops = [
                    asyncio.create_task(browsers.run(client, stop)) for _ in range(args.concurrency)
                ]
                started = time.monotonic()
                await asyncio.sleep(WARMUP_S)
                recovery, windows = await kill_each(
                    stack, cluster, ends, tally, started=started, settle_s=args.settle
                )
                stop.set()
                await asyncio.gather(*loops)
                await browsers.flush(client, time.monotonic() + 30)
            redis: RedisClient = await open_client(ends.redis_url)
            try:
                figures = await verify(
                    redis,
                    tally,
                    settings.event_partitions,
                    DIM,
                    data_dir=settings.data_dir,
                )
            finally:
                await redis.aclose()
            stop_supervising.set()
            await supervisor
    p99 = {
        victim: {
            "during": p99_between(tally, killed, back + 1.0),
            "after": p99_between(tally, back + 1.0, end),
        }
        for victim, (killed, back, end) in windows.items()
    }
    series = p99_per_interval(tally.latencies_ms, 1.0)
    plot(args.out / "failover.png", series, windows)
    report(tally, figures, recovery, p99, p99_between(tally, 0.0, WARMUP_S))
    save_and_finish(
        summary(tally, figures, recovery, p99, p99_between(tally, 0.0, WARMUP_S)),
        args.out / "failover.json",
        args.out / "failover.png",
        begun,
        # the p99 per second over the run and when each failure began and ended
        {
            "p99_ms_per_s": series,
            "failures_s": {v: [round(x, 2) for x in w[:2]] for v, w in windows.items()},
        },
    )


def report(
    tally: Tally,
    figures: dict[str, int],
    recovery: dict[str, float],
    p99: dict[str, dict[str, float]],
    warm_p99: float,
) -> None:
    requests = sum(tally.statuses.values())
    print(f"requests answered {requests:,}; by endpoint and status:")
    for (endpoint, status), n in sorted(tally.statuses.items()):
        print(f"  {endpoint:<12} {status}  {n:,}")
    for error, n in sorted(tally.errors.items()):
        print(f"  {error:<40} {n:,} (no answer: refused connection or timeout)")
    print(f"p99 ms before any failure: {warm_p99}; during and after each: {p99}")
    print(f"feedback refused (503, Retry-After) by phase: {dict(tally.refused_by_phase)}")
    print(f"feedback held at an edge (202) by phase: {dict(tally.held_by_phase)}")
    print(
        f"feedback: {figures['acked']:,} acknowledged, {figures['applied']:,} of them applied, "
        f"{figures['lost']} lost; {figures['duplicates']} applied twice; "
        f"{tally.retries:,} resends"
    )


def summary(
    tally: Tally,
    figures: dict[str, int],
    recovery: dict[str, float],
    p99: dict[str, dict[str, float]],
    warm_p99: float,
) -> dict[str, Any]:
    return {
        "requests": sum(tally.statuses.values()),
        "acked_lost": figures["lost"],
        "edge_5xx": tally.five_xx(),
        "recovery_s": recovery,
        "acked": figures["acked"],
        "applied": figures["applied"],
        "duplicates": figures["duplicates"],
        "no_answer": sum(tally.errors.values()),
        "p99_ms_before": warm_p99,
        "p99_ms": p99,
        "feedback_503_by_phase": dict(tally.refused_by_phase),
        "feedback_202_held_by_phase": dict(tally.held_by_phase),
        "resends": tally.retries,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds after each recovery")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--replicas", type=int, default=2, help="replicas of each of the 3 primaries"
    )
    parser.add_argument("--keep", help="a directory for the stack's data and logs, kept")
    parser.add_argument(
        "--out",
        type=Path,
        default=results_dir("failover"),
        help="where the JSON and PNG go (.perso/bench/failover)",
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
