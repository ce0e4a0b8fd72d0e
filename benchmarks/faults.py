"""benchmarks.faults: every kind of process of the stack killed with SIGKILL, one at a time,
under steady load through the edges; what the clients saw and whether any acknowledged
feedback was lost.

The stack is ``perso up``'s (``perso.stack``, supervised: a killed child is restarted
after its back-off) on a small catalog, two regions, two stream workers, freshness tiers
off (every event applied at once), the embedded Redis with its append-only file. Simulated
browsers ask their region's edge for slates and click one item of one slate in three,
each click with its own ``interaction_id``; a click not acknowledged (503, a refused
connection, a timeout) is sent again, unchanged, until it is. A 202 (the edge held the
click on its disk while no origin could take it: ``edge.origins.feedback_spool``) is an
acknowledgement; before the check the run waits until the edges handed on all they held.
After a warm-up the schedule kills, in turn: the origin, a stream worker, Redis, an edge;
each time it waits until the process is back (a new PID answering) and the traffic has run
a while.
Then the load stops, the workers drain the streams, and every acknowledged click is
looked up in its user's applied-interaction window (each user clicks fewer than its 50
entries), so "lost" means acknowledged and never applied, exactly; one found there twice
would be double counting.

    .venv/bin/python -m benchmarks.faults [--users 300] [--concurrency 8] [--settle 12]

No baseline: the figures are absolute (DESIGN.md section 10). Last line: JSON with
``requests``, ``edge_5xx`` (every 5xx an edge sent, with its breakdown), the feedback
refused (503) and held (202) by phase, ``held_left`` (still held at the end), ``acked``,
``applied``, ``lost``, ``duplicates`` and each kill's recovery time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.fault_load import Browsers, Tally, phase_p99, ready, stack_settings, verify
from benchmarks.report import finish, machine
from perso.stack import Stack
from perso.stack_endpoints import Endpoints
from redis_client.client import connect

REGIONS = ("us-east", "eu-west")
DIM = 32
WARMUP_S = 8.0
# Killed in this order, one at a time.
VICTIMS = ("origin", "worker-0", "redis", "edge-eu-west")
BACK_IN_S = 90.0  # a killed process must be back within this long


async def kill(stack: Stack, ends: Endpoints, name: str) -> float:
    """SIGKILL ``name``'s process; seconds until a new process of it answers."""
    process = stack.processes()[name]
    assert process.child is not None, f"{name} is not running"
    old = process.child.pid
    killed_at = time.monotonic()
    os.kill(old, signal.SIGKILL)
    url = ends.origin_url if name == "origin" else None
    if name.startswith("edge-"):
        url = ends.edges[name.removeprefix("edge-")]
    while time.monotonic() - killed_at < BACK_IN_S:
        await asyncio.sleep(0.1)
        child = process.child
        if child is None or child.pid == old:
            continue
        if name.startswith("worker") or await ready(url, ends.redis_url):
            return time.monotonic() - killed_at
    raise RuntimeError(f"{name} did not come back within {BACK_IN_S} s")


async def run(args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="faults-") as tmp:
        data_dir = Path(args.keep) if args.keep else Path(tmp)
        print(f"data and logs in {data_dir}")
        settings = stack_settings(data_dir, REGIONS, DIM, "faults")
        stack = Stack(settings, free_ports=True, say=lambda line: print(f"  {line}"))
        tally = Tally()
        stop_supervising = asyncio.Event()
        async with stack as ends:
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
                marks = [("warm-up", 0.0)]
                await asyncio.sleep(WARMUP_S)
                recovery: dict[str, float] = {}
                for victim in VICTIMS:
                    marks.append((victim, time.monotonic() - started))
                    tally.phase = victim
                    recovery[victim] = round(await kill(stack, ends, victim), 2)
                    print(f"  {victim} killed, back after {recovery[victim]:.1f} s")
                    await asyncio.sleep(args.settle)
                stop.set()
                await asyncio.gather(*loops)
                await browsers.flush(client, time.monotonic() + 30)
            redis = connect(ends.redis_url)
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
    report(tally, figures, recovery, phase_p99(tally, marks))


def report(
    tally: Tally, figures: dict[str, int], recovery: dict[str, float], p99: dict[str, float]
) -> None:
    requests = sum(tally.statuses.values())
    print(f"requests answered {requests:,}; by endpoint and status:")
    for (endpoint, status), n in sorted(tally.statuses.items()):
        print(f"  {endpoint:<12} {status}  {n:,}")
    for error, n in sorted(tally.errors.items()):
        print(f"  {error:<40} {n:,} (no answer: refused connection or timeout)")
    print(f"p99 ms by phase: {p99}")
    print(f"feedback refused (503, Retry-After) by phase: {dict(tally.refused_by_phase)}")
    print(f"feedback held at an edge (202) by phase: {dict(tally.held_by_phase)}")
    print(
        f"feedback: {figures['acked']:,} acknowledged, {figures['applied']:,} of them applied, "
        f"{figures['lost']} lost; {figures['accepted']:,} accepted in the streams; "
        f"{figures['duplicates']} applied twice; {tally.retries:,} resends"
    )
    finish(
        {
            "requests": requests,
            "edge_5xx": tally.five_xx(),
            "personalize_5xx": tally.five_xx("personalize"),
            "feedback_5xx": tally.five_xx("feedback"),
            "no_answer": sum(tally.errors.values()),
            **figures,
            "recovery_s": recovery,
            "p99_ms_by_phase": p99,
            "feedback_503_by_phase": dict(tally.refused_by_phase),
            "feedback_202_held_by_phase": dict(tally.held_by_phase),
            "resends": tally.retries,
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--settle", type=float, default=12.0, help="seconds after each recovery")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", help="a directory for the stack's data and logs, kept")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
