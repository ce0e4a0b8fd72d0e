"""Lock acquire+release cycles per second and latency: our Redis lock (with fencing tokens)
and our Redlock over 3 nodes, against redis-py's ``Lock``, python-redis-lock and pottery's
``Redlock``, all in one run on Redis servers of their own (1 for single-node locks, 3 for
Redlock, on loopback).

Scenarios, each ``--seconds`` in ``ROUNDS`` rounds alternating between the locks:

- **single**: one client, one resource, one attempt per cycle (no contention);
- **contended**: 32 clients on one resource, each waiting as its lock does by default
  (ours: the ``DEFAULT`` preset, full-jitter backoff from 0.1 s, 10 attempts; redis-py:
  polls every 0.1 s; python-redis-lock: BLPOP on a release signal; pottery: random waits up
  to 0.2 s; the baselines give up after 5 s), then releasing. A client that gave up counts
  no cycle. With ``AGGRESSIVE`` (from 10 ms) our Redlock polls more and splits votes more:
  fewer cycles;
- **many**: 32 clients, each over its own 31 of ~1,000 resources (concurrent, uncontended).

A cycle is acquire, a yield to the other clients while held, release; its latency includes
the waits. Every hold is checked in the run: no two holders of a resource at once, and our
fencing tokens strictly increasing per resource. Like is measured with like: our locks,
redis-py's asyncio ``Lock`` and pottery's ``AIORedlock`` run as asyncio tasks in one event
loop; python-redis-lock and pottery's ``Redlock`` are synchronous, so their 32 clients are
32 threads and their single client a plain loop. CPU per cycle: this process's
(``time.process_time``) and the Redis servers' (``INFO cpu``), on a 2-core machine where
both compete.

Run: ``make bench-deps && .venv/bin/python -m benchmarks.locks [--seconds 3]`` (without the
bench extra, the baselines it brings are reported as null).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from benchmarks.report import finish, machine, percentile
from coordination.lock import DEFAULT, Lock, LockNotAcquired
from coordination.redis_lock import RedisLock
from coordination.redlock import Redlock
from perso.redis_server import RedisServer
from redis_client.client import RedisClient, connect

TTL_MS = 10_000
WAIT_S = 5  # the longest a baseline waits for a contended lock
CLIENTS = 32
PER_CLIENT = 31  # resources of each client in "many": 32 x 31 = 992
ROUNDS = 4  # short alternating rounds: a busy neighbour on the machine meets every lock

AsyncGrant = tuple[Callable[[], Awaitable[object]], int | None]  # release, fencing token
SyncGrant = tuple[Callable[[], object], int | None]
AsyncAcquire = Callable[[str, bool], Awaitable[AsyncGrant | None]]  # (resource, wait)
SyncAcquire = Callable[[str, bool], SyncGrant | None]
Pick = Callable[[int, int], str]  # (client, cycle) -> resource

SCENARIOS: dict[str, tuple[int, Pick, bool]] = {  # clients, resource, wait when held
    "single": (1, lambda client, n: "one", False),
    "contended": (CLIENTS, lambda client, n: "one", True),
    "many": (CLIENTS, lambda client, n: f"r{client * PER_CLIENT + n % PER_CLIENT}", True),
}


@dataclass
class Contender:
    key: str
    title: str
    urls: list[str]  # the servers whose CPU it uses
    aio: AsyncAcquire | None = None
    sync: SyncAcquire | None = None


@dataclass
class Tally:
    """One contender's cycles in one scenario, and the safety checks (thread-safe)."""

    latencies: list[float] = field(default_factory=list)
    elapsed_s: float = 0.0
    cpu_s: float = 0.0
    redis_cpu_s: float = 0.0
    gave_up: int = 0
    overlaps: int = 0
    regressions: int = 0
    served: set[int] = field(default_factory=set)
    holders: dict[str, int] = field(default_factory=dict)
    fencing: dict[str, int] = field(default_factory=dict)
    guard: threading.Lock = field(default_factory=threading.Lock)

    def enter(self, resource: str, fencing: int | None) -> None:
        with self.guard:
            self.holders[resource] = self.holders.get(resource, 0) + 1
            self.overlaps += self.holders[resource] > 1
            if fencing is not None:
                self.regressions += fencing <= self.fencing.get(resource, 0)
                self.fencing[resource] = fencing

    def leave(self, resource: str) -> None:
        # Before the release is sent: the next holder may be granted before it returns.
        with self.guard:
            self.holders[resource] -= 1

    def done(self, client: int, started: float) -> None:
        with self.guard:
            self.latencies.append(time.perf_counter() - started)
            self.served.add(client)

    def refused(self) -> None:
        with self.guard:
            self.gave_up += 1

    def figures(self) -> dict[str, Any]:
        cycles = max(len(self.latencies), 1)
        return {
            "cycles_per_s": round(len(self.latencies) / self.elapsed_s),
            "p50_ms": round(percentile(self.latencies, 50) * 1000, 3),
            "p99_ms": round(percentile(self.latencies, 99) * 1000, 3),
            "cpu_us_per_cycle": round(self.cpu_s / cycles * 1e6, 1),
            "redis_cpu_us_per_cycle": round(self.redis_cpu_s / cycles * 1e6, 1),
            "cycles": len(self.latencies),
            "clients_served": len(self.served),
            "gave_up": self.gave_up,
            "overlaps": self.overlaps,
            "fencing_regressions": self.regressions,
        }


async def aio_client(
    acquire: AsyncAcquire, tally: Tally, client: int, *, pick: Pick, wait: bool, deadline: float
) -> None:
    n = 0
    while time.perf_counter() < deadline:
        resource, n = pick(client, n), n + 1
        started = time.perf_counter()
        grant = await acquire(resource, wait)
        if grant is None:
            tally.refused()
            continue
        release, fencing = grant
        tally.enter(resource, fencing)
        await asyncio.sleep(0)  # held while the other clients run
        tally.leave(resource)
        await release()
        tally.done(client, started)


def sync_client(
    acquire: SyncAcquire, tally: Tally, client: int, *, pick: Pick, wait: bool, deadline: float
) -> None:
    n = 0
    while time.perf_counter() < deadline:
        resource, n = pick(client, n), n + 1
        started = time.perf_counter()
        grant = acquire(resource, wait)
        if grant is None:
            tally.refused()
            continue
        release, fencing = grant
        tally.enter(resource, fencing)
        time.sleep(0)  # held while the other threads run
        tally.leave(resource)
        release()
        tally.done(client, started)


def redis_cpu_s(urls: list[str]) -> float:
    total = 0.0
    for url in urls:
        with redis.Redis.from_url(url) as client:
            cpu = client.info("cpu")
            total += float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
    return total


async def measure(contender: Contender, scenario: str, seconds: float, tally: Tally) -> None:
    clients, pick, wait = SCENARIOS[scenario]
    resource_of: Pick = lambda client, n: f"{contender.key}:{pick(client, n)}"  # noqa: E731
    redis_before, cpu_before = redis_cpu_s(contender.urls), time.process_time()
    started = time.perf_counter()
    deadline = started + seconds
    if contender.aio is not None:
        run = functools.partial(aio_client, contender.aio, tally, pick=resource_of, wait=wait)
        await asyncio.gather(*(run(client, deadline=deadline) for client in range(clients)))
    elif contender.sync is not None:
        work = functools.partial(sync_client, contender.sync, tally, pick=resource_of, wait=wait)
        threads = [
            threading.Thread(target=work, args=(client,), kwargs={"deadline": deadline})
            for client in range(1, clients)
        ]
        for thread in threads:
            thread.start()
        work(0, deadline=deadline)  # in this thread: a plain loop when it is the only client
        for thread in threads:
            thread.join()
    tally.elapsed_s += time.perf_counter() - started
    tally.cpu_s += time.process_time() - cpu_before
    tally.redis_cpu_s += redis_cpu_s(contender.urls) - redis_before


def ours(lock: Lock) -> AsyncAcquire:
    async def acquire(resource: str, wait: bool) -> AsyncGrant | None:
        if not wait:
            lease = await lock.try_acquire(resource, TTL_MS)
        else:
            try:
                lease = await lock.acquire(resource, TTL_MS, retry=DEFAULT)
            except LockNotAcquired:
                return None
        return None if lease is None else (functools.partial(lock.release, lease), lease.fencing)

    return acquire


def redis_py(client: RedisClient) -> AsyncAcquire:
    async def acquire(resource: str, wait: bool) -> AsyncGrant | None:
        lock = client.lock(resource, timeout=TTL_MS / 1000, blocking_timeout=WAIT_S)
        return (lock.release, None) if await lock.acquire(blocking=wait) else None

    return acquire


def baselines(url: str, urls: list[str]) -> list[Contender]:
    """The bench extra's libraries that are installed, each as a contender."""
    found: list[Contender] = []
    try:
        # Optional (the bench extra): imported here so the benchmark runs without them.
        import redis_lock  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: PLC0415
    except ImportError:
        print("python-redis-lock: not installed (make bench-deps); its figures are null")
    else:
        logging.getLogger("redis_lock").setLevel(logging.ERROR)  # a warning per refusal
        client = redis.Redis.from_url(url)

        def prl(resource: str, wait: bool) -> SyncGrant | None:
            lock = redis_lock.Lock(client, resource, expire=TTL_MS // 1000)
            return (lock.release, None) if lock.acquire(wait, WAIT_S if wait else None) else None

        found.append(Contender("python_redis_lock", "python-redis-lock (threads)", [url], sync=prl))
    try:
        import pottery  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415
    except ImportError:
        print("pottery: not installed (make bench-deps); its figures are null")
        return found
    masters = [redis.Redis.from_url(u) for u in urls]
    # pottery's own nodes: each a single Redis (Redlock's nodes are independent).
    aio_masters = [redis.asyncio.Redis.from_url(u) for u in urls]

    def pottery_sync(resource: str, wait: bool) -> SyncGrant | None:
        lock = pottery.Redlock(key=resource, masters=masters, auto_release_time=TTL_MS / 1000)
        held = lock.acquire(blocking=wait, timeout=WAIT_S if wait else -1)
        return (lock.release, None) if held else None

    async def pottery_aio(resource: str, wait: bool) -> AsyncGrant | None:
        lock = pottery.AIORedlock(
            key=resource, masters=aio_masters, auto_release_time=TTL_MS / 1000
        )
        held = await lock.acquire(blocking=wait, timeout=WAIT_S if wait else -1)
        return (lock.release, None) if held else None

    found.append(
        Contender("pottery_redlock", "pottery Redlock x3 (threads)", urls, sync=pottery_sync)
    )
    found.append(Contender("pottery_aioredlock", "pottery AIORedlock x3", urls, aio=pottery_aio))
    return found


async def run(seconds: float) -> tuple[dict[str, str], dict[str, dict[str, Tally]]]:
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        servers = [
            stack.enter_context(RedisServer(Path(tmp) / f"redis-{i}", persistent=False))
            for i in range(4)
        ]
        url, urls = servers[0].url, [s.url for s in servers[1:]]
        client = connect(url)
        # No client retries: a dead node must fail its vote within the node timeout.
        nodes = [connect(u, retry=Retry(NoBackoff(), 0)) for u in urls]
        contenders = [
            Contender(
                "redis_lock", "ours RedisLock", [url], aio=ours(RedisLock(client, time.time))
            ),
            Contender("redis_py_lock", "redis-py asyncio Lock", [url], aio=redis_py(client)),
            Contender("redlock", "ours Redlock x3", urls, aio=ours(Redlock(nodes, time.monotonic))),
            *baselines(url, urls),
        ]
        tallies = {c.key: {s: Tally() for s in SCENARIOS} for c in contenders}
        for scenario in SCENARIOS:
            for _ in range(ROUNDS):
                for contender in contenders:
                    tally = tallies[contender.key][scenario]
                    await measure(contender, scenario, seconds / ROUNDS, tally)
        for each in (client, *nodes):
            await each.aclose()
    return {c.key: c.title for c in contenders}, tallies


RATIOS = (  # key in the JSON, ours, baseline
    ("ratio_vs_redis_py_lock", "redis_lock", "redis_py_lock"),
    ("ratio_redlock_vs_pottery", "redlock", "pottery_redlock"),
    ("ratio_redlock_vs_pottery_aio", "redlock", "pottery_aioredlock"),
)


def ratio(figures: dict[str, dict[str, Any]], key: str, base: str, scenario: str) -> float | None:
    if base not in figures:
        return None
    ours_rate, base_rate = (figures[k][scenario]["cycles_per_s"] for k in (key, base))
    return round(float(ours_rate) / float(base_rate), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per lock and scenario (3)")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    titles, tallies = asyncio.run(run(args.seconds))
    figures = {key: {s: t.figures() for s, t in by.items()} for key, by in tallies.items()}
    print(f"{'lock':<30}{'scenario':<11}{'cycles/s':>9}{'p50 ms':>9}{'p99 ms':>9}"
          f"{'cpu us':>8}{'redis us':>9}  served  gave up  overlaps  fencing<=")  # fmt: skip
    for key, by in figures.items():
        for scenario, f in by.items():
            print(
                f"{titles[key]:<30}{scenario:<11}{f['cycles_per_s']:>9,}{f['p50_ms']:>9.3f}"
                f"{f['p99_ms']:>9.3f}{f['cpu_us_per_cycle']:>8.0f}"
                f"{f['redis_cpu_us_per_cycle']:>9.0f}  {f['clients_served']:>6}"
                f"  {f['gave_up']:>7}  {f['overlaps']:>8}  {f['fencing_regressions']:>9}"
            )
    result: dict[str, Any] = {"cycles_per_s": figures["redis_lock"]["single"]["cycles_per_s"]}
    for name, ours_key, base in RATIOS:
        ratios = {s: ratio(figures, ours_key, base, s) for s in SCENARIOS}
        shown = ("n/a (not installed)" if r is None else f"{r}x" for r in ratios.values())
        print(f"{name}: " + ", ".join(f"{s} {r}" for s, r in zip(ratios, shown, strict=True)))
        for scenario, value in ratios.items():
            result[name + ("" if scenario == "single" else f"_{scenario}")] = value
    safe = all(f["overlaps"] == 0 and f["fencing_regressions"] == 0
               for by in figures.values() for f in by.values())  # fmt: skip
    print(
        "safety: " + ("no overlapping holders, fencing tokens increasing" if safe else "VIOLATED")
    )
    locks: dict[str, Any] = dict(figures)
    for absent in ("python_redis_lock", "pottery_redlock", "pottery_aioredlock"):
        locks.setdefault(absent, None)  # not installed
    finish({**result, "safe": safe, "seconds": args.seconds, "clients": CLIENTS, "locks": locks})


if __name__ == "__main__":
    main()
