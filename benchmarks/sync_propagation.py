"""Sync propagation: from a publish on the origin to the message applied at every edge,
against a bare redis-py XADD -> blocking XREAD round trip, and the publish rate the edges
keep up with.

One embedded Redis; 3 regions x 2 edges = 6 ``SyncSubscriber``s (each with its own client
and a ``RedisCursor``), in 2 edge processes of 3 (one edge of each region per process),
and as many bare readers in 2 more processes; the publisher in this process. Clocks:
``time.time()`` in every process of this machine.

1. **Bare baseline**: per message, one pipelined XADD to each region's stream (same body,
   no script, no sequence); 6 readers, each a plain ``XREAD BLOCK`` loop (same batch and
   block time as the subscribers) that notes when it read the message.
2. **Sync**: ``SyncPublisher.publish([message])`` per message (one script: sequence, 3
   XADDs); each edge decodes, checks continuity, applies (a dict write) and saves its
   cursor (in the background, every 0.1 s). A sample is publish called -> applied at the
   last of the 6 edges (read, for the baseline).
   Both at ``--rate`` messages/s (each its own publish) for ``--seconds`` in all, in two
   alternating rounds each, so that a busy neighbour on a shared machine meets both.
3. **Sustained rate**: the publisher batches what is due every 5 ms (as an origin under
   load would) at rising rates, ``--step-seconds`` each; the edges keep up while their
   backlog (the last sequence published minus the slowest edge's saved cursor, which
   trails by up to the 0.1 s between cursor saves), averaged over the step's second half,
   stays under a quarter of a second's worth plus one read batch. The highest such rate is
   reported; the steps stop at the first rate the edges do not keep up with.

Run: ``.venv/bin/python -m benchmarks.sync_propagation [--rate 1000] [--seconds 10] [--out
DIR]``; ``sync_propagation.json`` and ``.png`` (the latency CDFs, the backlog per rate
step) go to ``--out`` (default ``.perso/bench/sync_propagation``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from benchmarks.report import machine, percentile, quantiles, results_dir, save_and_finish
from perso import plots
from perso.redis_server import RedisServer
from protocol import keys
from redis_client.client import RedisClient, connect
from sync.codec import encode_message
from sync.cursor import RedisCursor
from sync.gaps import Gap
from sync.messages import Envelope, InvalidateUser, ItemUpdate, Message, PurgeTag
from sync.publisher import SyncPublisher
from sync.subscriber import SyncSubscriber

REGIONS = ("eu", "us", "ap")
EDGE_PROCESSES = 2
BATCH = 500
BLOCK_MS = 200
STEP_RATES = (2_000, 5_000, 10_000, 15_000, 20_000, 30_000, 40_000, 60_000, 80_000)
TICK_S = 0.005
MAX_PER_PUBLISH = 1_000
ROUNDS = 2

Times = npt.NDArray[np.float64]


def message(n: int) -> Message:
    """A mix like an origin's: mostly user invalidations, some purges and item changes."""
    if n % 10 == 0:
        return PurgeTag(f"item:it-{n % 5000}", soft=False)
    if n % 10 == 1:
        return ItemUpdate(f"it-{n % 5000}", in_stock=n % 3 != 0, price=None)
    return InvalidateUser(f"u-{n % 100_000}", "purchase")


def bare_stream(region: str) -> str:
    return keys.edge_sync_stream(f"bare-{region}")


def edge_name(region: str, index: int) -> str:
    return f"{region}-{index}"


# --- edge processes ----------------------------------------------------------------------


async def edge_sync(url: str, index: int, record: int, out: Path) -> None:
    """Three subscribers (one per region) until SIGTERM; apply times of seqs <= record."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    clients = [connect(url) for _ in REGIONS]
    times = {region: np.full(record + 1, np.nan) for region in REGIONS}
    gaps: list[str] = []
    state: dict[str, int] = {}

    def applier(region: str) -> Callable[[Envelope], Awaitable[None]]:
        noted = times[region]

        async def apply(envelope: Envelope) -> None:
            if envelope.seq <= record:
                noted[envelope.seq] = time.time()
            state[repr(envelope.message)[:40]] = envelope.seq  # the edge's own work, a little

        return apply

    async def on_gap(gap: Gap) -> None:
        gaps.append(f"{gap.region}: {gap.kind} {gap.detail}")

    subscribers = [
        SyncSubscriber(
            client,
            region,
            applier(region),
            RedisCursor(client, keys.edge_sync_cursor(edge_name(region, index))),
            time.time,
            on_gap=on_gap,
            block_ms=BLOCK_MS,
            batch=BATCH,
        )
        for client, region in zip(clients, REGIONS, strict=True)
    ]
    tasks = [asyncio.create_task(s.run(stop)) for s in subscribers]
    for _ in range(3000):  # started: every cursor resolved
        if all(s.position is not None for s in subscribers):
            break
        await asyncio.sleep(0.01)
    print("ready", flush=True)
    await asyncio.gather(*tasks)
    np.savez(out, **times)  # type: ignore[arg-type]
    stats = {s.region: vars(s.stats) for s in subscribers}
    out.with_suffix(".json").write_text(json.dumps({"stats": stats, "gaps": gaps}))
    for client in clients:
        await client.aclose()


async def edge_bare(url: str, record: int, out: Path) -> None:
    """Three plain XREAD BLOCK readers until SIGTERM; read times of messages < record."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    times = {region: np.full(record, np.nan) for region in REGIONS}

    async def read(region: str) -> None:
        client = connect(url)
        stream, position, noted = bare_stream(region), "0-0", times[region]
        while not stop.is_set():
            reply = await client.xread({stream: position}, count=BATCH, block=BLOCK_MS)
            for entry_id, fields in cast(list[Any], reply)[0][1] if reply else []:
                noted[int(fields[b"i"])] = time.time()
                position = entry_id
        await client.aclose()

    tasks = [asyncio.create_task(read(region)) for region in REGIONS]
    await asyncio.sleep(0.2)  # blocked in XREAD
    print("ready", flush=True)
    await asyncio.gather(*tasks)
    np.savez(out, **times)  # type: ignore[arg-type]


# --- this process --------------------------------------------------------------------------


class Edges:
    """The edge processes of one phase."""

    def __init__(self, mode: str, url: str, record: int, tmp: Path) -> None:
        self.mode, self.url, self.record, self.tmp = mode, url, record, tmp
        self.processes: list[asyncio.subprocess.Process] = []
        self.outs = [tmp / f"{mode}-{i}.npz" for i in range(EDGE_PROCESSES)]

    async def __aenter__(self) -> Edges:
        for index, out in enumerate(self.outs):
            argv = ["--edge", self.mode, "--url", self.url, "--index", str(index)]
            argv += ["--record", str(self.record), "--child-out", str(out)]
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "benchmarks.sync_propagation", *argv,
                stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            self.processes.append(process)
        for process in self.processes:
            assert process.stdout is not None
            line = await asyncio.wait_for(process.stdout.readline(), 30)
            if line.strip() != b"ready":
                raise RuntimeError(f"edge process did not start: {line!r}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        for process in self.processes:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                await asyncio.wait_for(process.wait(), 15)
            except TimeoutError:
                process.kill()
                await process.wait()

    def times(self) -> list[Times]:
        """Per edge, when each message was applied (NaN: never)."""
        edges = []
        for out in self.outs:
            with np.load(out) as data:
                edges += [data[region] for region in REGIONS]
        return edges

    def report(self) -> dict[str, Any]:
        merged: dict[str, Any] = {"stats": {}, "gaps": []}
        for index, out in enumerate(self.outs):
            doc = json.loads(out.with_suffix(".json").read_text())
            for region, stats in doc["stats"].items():
                merged["stats"][edge_name(region, index)] = stats
            merged["gaps"] += doc["gaps"]
        return merged


async def paced(
    rate: int, count: int, send: Callable[[int], Awaitable[None]], first: int = 0
) -> None:
    """``send(n)`` for n from ``first``, ``count`` times, at ``rate`` per second (each
    awaited)."""
    sent, started = 0, time.perf_counter()
    while sent < count:
        due = min(int((time.perf_counter() - started) * rate), count)
        while sent < due:
            await send(first + sent)
            sent += 1
        await asyncio.sleep(0.0002)


def latencies_ms(published: Times, edges: list[Times]) -> tuple[list[float], int]:
    """Publish -> applied at the last edge, ms, per message; and how many some edge missed."""
    done = np.vstack(edges)
    complete = ~np.isnan(done).any(axis=0) & ~np.isnan(published)
    samples = (done.max(axis=0) - published)[complete] * 1000
    return [float(s) for s in samples], int((~complete & ~np.isnan(published)).sum())


async def min_applied(redis: RedisClient) -> int:
    """The slowest edge's last applied sequence, from the cursors the edges save."""
    cursors = [
        await RedisCursor(redis, keys.edge_sync_cursor(edge_name(r, i))).load()
        for r in REGIONS
        for i in range(EDGE_PROCESSES)
    ]
    return min((c.seq or 0) if c is not None else 0 for c in cursors)


async def drain(redis: RedisClient, last_seq: int, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while await min_applied(redis) < last_seq:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def step(
    publisher: SyncPublisher, redis: RedisClient, rate: int, seconds: float
) -> dict[str, Any]:
    """Publish batches due every tick at ``rate`` for ``seconds``; the backlog seen."""
    backlogs: list[tuple[float, int]] = []
    last_seq = 0
    sent, started = 0, time.perf_counter()
    next_probe = started
    while (elapsed := time.perf_counter() - started) < seconds:
        due = int(elapsed * rate)
        while sent < due:
            chunk = min(due - sent, MAX_PER_PUBLISH)
            last_seq = (await publisher.publish([message(sent + k) for k in range(chunk)]))[-1]
            sent += chunk
        if time.perf_counter() >= next_probe:
            backlogs.append((elapsed, last_seq - await min_applied(redis)))
            next_probe += 0.1
        await asyncio.sleep(TICK_S)
    second_half = [b for t, b in backlogs if t >= seconds / 2] or [0]
    mean_backlog = sum(second_half) / len(second_half)
    return {
        "rate": rate,
        "published_per_s": round(sent / seconds),
        "backlog_mean_second_half": round(mean_backlog),
        "backlog_max_second_half": max(second_half),
        # A stall that the edges recover from within the step is no failure to keep up.
        "kept_up": mean_backlog <= rate / 4 + BATCH and sent >= 0.95 * rate * seconds,
        "drained": await drain(redis, last_seq),
    }


async def steps(
    publisher: SyncPublisher, redis: RedisClient, seconds: float
) -> list[dict[str, Any]]:
    print("sustained rate (publishes batched every 5 ms):")
    results: list[dict[str, Any]] = []
    for rate in STEP_RATES:
        result = await step(publisher, redis, rate, seconds)
        results.append(result)
        print(
            f"  {rate:>6,}/s: published {result['published_per_s']:,}/s, backlog in the "
            f"second half: mean {result['backlog_mean_second_half']:,}, max "
            f"{result['backlog_max_second_half']:,}; "
            f"{'kept up' if result['kept_up'] else 'fell behind'}"
        )
        if not (result["kept_up"] and result["drained"]):
            break
    return results


async def measure(
    url: str, rate: int, seconds: float, step_seconds: float, tmp: Path
) -> dict[str, Any]:
    """Bare and sync in alternating rounds (on a shared machine, both meet the same
    neighbours), then the rate steps."""
    n = int(rate * seconds)
    per_round = n // ROUNDS
    bare_published = np.full(n, np.nan)  # by message
    sync_published = np.full(n + 1, np.nan)  # by sequence
    redis = connect(url)
    publisher = SyncPublisher(redis, REGIONS, time.time)
    bodies = [encode_message(message(i)) for i in range(n)]
    last_seq = 0

    async def send_bare(i: int) -> None:
        bare_published[i] = time.time()
        async with redis.pipeline(transaction=False) as pipe:
            for region in REGIONS:
                pipe.xadd(bare_stream(region), {"i": i, "m": bodies[i]})
            await pipe.execute()

    async def send_sync(i: int) -> None:
        nonlocal last_seq
        before = time.time()
        [last_seq] = await publisher.publish([message(i)])
        sync_published[last_seq] = before

    async with Edges("bare", url, n, tmp) as bare, Edges("sync", url, n, tmp) as synced:
        for r in range(ROUNDS):
            await paced(rate, per_round, send_bare, first=r * per_round)
            await asyncio.sleep(0.5)  # the last reads
            await paced(rate, per_round, send_sync, first=r * per_round)
            await drain(redis, last_seq)
        results = await steps(publisher, redis, step_seconds)
    await redis.aclose()
    bare_ms, bare_missed = latencies_ms(bare_published, bare.times())
    sync_ms, sync_missed = latencies_ms(sync_published, synced.times())
    return {
        "bare": bare_ms,
        "bare_missed": bare_missed,
        "sync": sync_ms,
        "missed": sync_missed,
        "steps": results,
        "report": synced.report(),
    }


def plot(
    path: Path, sync_ms: list[float], bare_ms: list[float], steps: list[dict[str, Any]]
) -> None:
    """The two latency CDFs; the backlog at each rate step against the keep-up bound."""
    with plots.figure(
        path, "Sync propagation: publish to applied at all 6 edges", panels=2, width=10
    ) as (left, right):
        plots.cdf(left, sync_ms, f"sync (SyncPublisher, {len(sync_ms):,} messages)", log_x=True)
        plots.cdf(left, bare_ms, "bare XADD -> XREAD baseline", log_x=True)
        plots.labelled(
            left, "latency CDF, paced publishes", "ms to the last edge (log scale)", "share"
        )
        rates = [s["rate"] for s in steps]
        right.plot(
            rates, [s["backlog_mean_second_half"] for s in steps], marker="o", label="backlog"
        )
        right.plot(
            rates,
            [r / 4 + BATCH for r in rates],
            linestyle="--",
            color="grey",
            label="kept-up bound (1/4 s + a batch)",
        )
        plots.labelled(
            right,
            "sustained rate steps",
            "publish rate (messages/s)",
            "mean backlog, 2nd half (messages)",
        )


async def run(rate: int, seconds: float, step_seconds: float, out: Path) -> None:
    started = time.perf_counter()
    print(f"machine: {machine()}")
    print(
        f"{len(REGIONS)} regions x {EDGE_PROCESSES} edges in {EDGE_PROCESSES} processes "
        f"(and as many bare readers in {EDGE_PROCESSES} more), "
        f"{rate:,} messages/s, {seconds:g} s each for bare and sync in {ROUNDS} rounds"
    )
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        with RedisServer(tmp / "redis", persistent=False) as server:
            got = await measure(server.url, rate, seconds, step_seconds, tmp)
    bare, samples, results = got["bare"], got["sync"], got["steps"]
    p50, p99 = percentile(samples, 50), percentile(samples, 99)
    bare_p50, bare_p99 = percentile(bare, 50), percentile(bare, 99)
    kept = [s["rate"] for s in results if s["kept_up"] and s["drained"]]
    sustained = max(kept) if kept else None
    top = len(results) == len(STEP_RATES) and results[-1]["kept_up"]
    stats = got["report"]["stats"].values()
    gaps = sum(s["gaps"] for s in stats)
    print(
        f"bare XADD -> XREAD at all 6 readers: p50 {bare_p50:.2f} ms, p99 {bare_p99:.2f} ms "
        f"({got['bare_missed']} missed)"
    )
    print(
        f"publish -> applied at all 6 edges: p50 {p50:.2f} ms, p99 {p99:.2f} ms, "
        f"max {max(samples):.2f} ms ({len(samples):,} messages, {got['missed']} missed); "
        f"{p99 / bare_p99:.2f}x the bare p99"
    )
    print(
        f"edges: applied {sum(s['applied'] for s in stats):,}, gaps {gaps}, malformed "
        f"{sum(s['malformed'] for s in stats)}; highest rate kept up with: "
        f"{'none' if sustained is None else f'{sustained:,}'}/s"
        + (" (the top step: more was not tried)" if top else "")
    )
    plot(out / "sync_propagation.png", samples, bare, results)
    save_and_finish(
        {
            "p50_ms": round(p50, 2),
            "p99_ms": round(p99, 2),
            "max_ms": round(max(samples), 2),
            "bare_p50_ms": round(bare_p50, 2),
            "bare_p99_ms": round(bare_p99, 2),
            "ratio_vs_bare": round(p99 / bare_p99, 2),
            "sustained_msgs_per_s": sustained,
            "rate": rate,
            "messages": len(samples),
            "missed": got["missed"],
            "edges": len(REGIONS) * EDGE_PROCESSES,
            "edge_processes": EDGE_PROCESSES,
            "gaps": gaps,
            "steps": [
                {k: s[k] for k in ("rate", "published_per_s", "backlog_mean_second_half")}
                for s in results
            ],
        },
        out / "sync_propagation.json",
        out / "sync_propagation.png",
        started,
        # the distributions, as 101 quantiles each (0 to 100%)
        {"cdf_ms": quantiles(samples), "bare_cdf_ms": quantiles(bare)},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rate", type=int, default=1000, help="messages/s (1000)")
    parser.add_argument("--seconds", type=float, default=10.0, help="per phase (10)")
    parser.add_argument("--step-seconds", type=float, default=3.0, help="per rate step (3)")
    parser.add_argument("--edge", choices=["sync", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--record", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--out",
        type=Path,
        default=results_dir("sync_propagation"),
        help="where the JSON and PNG go (.perso/bench/sync_propagation)",
    )
    args = parser.parse_args()
    if args.edge == "sync":
        asyncio.run(edge_sync(args.url, args.index, args.record, args.child_out))
    elif args.edge == "bare":
        asyncio.run(edge_bare(args.url, args.record, args.child_out))
    else:
        asyncio.run(run(args.rate, args.seconds, args.step_seconds, args.out))


if __name__ == "__main__":
    main()
