"""Edge hit path: requests/s and latency of one edge process on one core, compared in the
same run with a raw ASGI app, a FastAPI endpoint and nginx sending the same bytes; and the
edge's personal-ranking hit, a power user's slate ranked at the edge from a cached pool.

The edge is the real one: ``perso.stack.Stack`` starts an embedded Redis, a 1,000-item
catalog (dimension 128, the default), the origin and one ``perso edge`` process (uvicorn)
with ranking at the edge on (``PERSO_EDGE_RANKING``) and pools of ``POOL_SIZE`` candidates
(``PERSO_POOL_SIZE``), fresh for longer than the run (``PERSO_EDGE_POOL_TTL_S`` and
``PERSO_EDGE_TTL_POWER_S``), so none is refreshed during it. The benchmark mints user tokens
locally with the identity key it configures (256 users per kind, premium tier, each far
below its per-user rate limit):

- **shared hit**: segment new, users of whom nothing is known: the edge ranks them by the
  segment's own ranking from the pool, a run of the segment's bank each in turn
  (``edge.ranking.run_banks.SegmentBanks``; before issue 28 they shared one cached entry, the
  origin's ranking, and this target measured serving its bytes). The benchmark captures
  one HIT answer (status, headers, body) for the baselines to send.
- **personal hit**: segment power: each is ranked at the edge (``edge.serve.pool_answer``) from
  the segment's pool and their own state. Before each run every user is warmed with one
  request (the pool filled once, each user's state fetched once), each answer checked to
  be ranked at the edge (``metadata.tier`` ``edge``). The pool's size is asked of the
  origin once, as the edge asks for it (``OriginClient.pools``).

Then, one target at a time, the server is pinned to core 0 and wrk, on core 1, sends POST
``/v1/personalize`` requests (one user's token and body after the other, from a Lua
script) to:

- **edge**: the edge process of the stack (its whole process, every thread, pinned), the
  shared users' requests;
- **personal**: the same edge process, the power users' requests;
- **raw ASGI**: ``benchmarks.raw_asgi`` ``RawApp``: reads the body, sends the captured
  answer; served by the edge's own uvicorn set-up (``perso.cli._serve``: uvloop,
  httptools, access log off);
- **FastAPI**: the same answer from a FastAPI route, same server set-up;
- **nginx**: the captured body as a static file, one worker, access log off, sendfile,
  ``keepalive_requests`` unbounded like uvicorn's; nginx answers POST to a static file
  with 405, so the location has ``error_page 405 =200 $uri`` (the POST is read and the
  file sent as for a GET).

In each round (three by default; the figures reported are each target's round of the
median requests/s, with the range of all rounds beside them) each target gets a warm-up,
a measured run (``-t1 -c32``: requests/s, p50 and p99 as wrk measures them, closed loop,
so p99 at saturation is mostly queueing) and a short
run on one connection (the latency of one request at a time). The CPU time the server and
wrk used is read from ``/proc``: the server's share of its core says whether the core was
the limit (on a machine busy with other work it is not, and requests/s understate the
server), and its CPU time per request compares the apps independently of that. The edge's
answers are checked to be hits: its cache entry count before and after each run (a new
entry is a miss, such as the 15-minute time bucket turning), every user's answer after each
run (``X-Cache``, ``rate_limited``), and wrk's count of non-2xx answers. The personal hit
is checked by the edge's own counters (``/metrics``) over each run, warm-up included: every
answer ranked at the edge (``ranked_here``) and a hit on the cached pool, none a miss, no
pool fill and no user's state fetched from the origin, the ranked answers as many as wrk
counted (or up to one per connection and run more: those in flight when wrk stopped), and
how many of them were served a run of their user's bank (``ranked_from_bank``: with 256
users in turn and pools fresh all run, 63 of every 64 of a user's requests); and
by every user's answer after each run (``X-Cache`` HIT, ``metadata.tier`` edge, not rate
limited). The target: a personal hit's CPU time per request at most 1.25 times a shared
hit's (``TARGET_PERSONAL_CPU``).

That is the best case (no worker, so no model ever changes; pools of 300 never refreshed).
``--realistic`` runs the shipped settings instead (``PERSO_WORKERS``, ``PERSO_POOL_SIZE``,
``PERSO_EDGE_POOL_TTL_S``, ``PERSO_EDGE_TTL_POWER_S`` at their defaults: the stream
workers consume the edge's decision log, pools refresh in the background) and changes the
power users' models while they are served, as often as the traffic model's power users
interact (0.6 per page view: ``benchmarks.model_updates``), each change voiding the user's
bank of runs; the share of answers served from a bank is reported. Pool refreshes are
allowed in that mode's check (none makes a request wait).

Tools: wrk and nginx come from Debian's packages; ``make bench-tools`` installs them (as
root: ``apt-get install -y wrk nginx``). A missing tool is reported: without nginx its
figures are null; without wrk nothing can be measured and every figure is null.

Run: ``.venv/bin/python -m benchmarks.edge_hit [--seconds 8] [--connections 32] [--rounds 3]
[--realistic] [--out DIR]``; ``edge_hit.json`` and ``edge_hit.png`` (requests/s and wrk's
p50 and p99 per target: the edge beside raw ASGI, FastAPI and nginx) go to ``--out``
(default ``.perso/bench/edge_hit``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import grp
import http.client
import json
import os
import pwd
import secrets
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import SecretStr

from benchmarks import edge_hit_figure as figure
from benchmarks.bench_processes import find_edge_pid, pin, process_tree, tool
from benchmarks.model_updates import POWER_INTERACTION_SHARE, ModelUpdates, Sent
from benchmarks.raw_asgi import CapturedAnswer
from benchmarks.report import machine, results_dir, save_and_finish
from benchmarks.wrk_load import (
    PATH,
    TIER,
    Load,
    User,
    mint_users,
    request,
    run_wrk,
    wrk_script,
)
from config.settings import Settings
from edge.origins.client import OriginClient
from edge.serve.fill import as_fill
from perso.process import Child, free_port, log_tail, spawn, stop
from perso.stack import Stack
from perso.stack_endpoints import Endpoints
from protocol.api import Constraints, PersonalizeRequest
from protocol.audience import Shared
from protocol.segments import Segment
from protocol.tiers import LIMITS, PERSONALIZE

REGION = "bench"
USERS = 256
WARMUP_S = 2
ONE_CONNECTION_S = 3
TARGET_RATIO = 0.8
# A personal hit's CPU time per request against a shared hit's, at most (stretch 1.0).
TARGET_PERSONAL_CPU = 1.25
CATALOG_SIZE = 1000
POOL_SIZE = 300
# Longer than the benchmark runs: no pool is refreshed, nor its refresh window reached.
POOL_TTL_S = 1800
# The best case's settings (all but ``--realistic``): no worker (so no model changes and
# no posterior stream), smaller pools, never refreshed.
BEST_CASE: dict[str, Any] = {
    "workers": 0,
    "pool_size": POOL_SIZE,
    "edge_pool_ttl_s": POOL_TTL_S,
    "edge_ttl_power_s": POOL_TTL_S,
}
READY_TIMEOUT_S = 30.0
# Headers the server writes itself: not part of the app's answer.
SERVER_HEADERS = frozenset({"date", "server", "content-length", "transfer-encoding", "connection"})
NGINX_METHOD = "POST, answered by error_page 405 =200 $uri (the static file, as for a GET)"
BUSY = 0.9  # a process using this share of a core or more was the limit of its run


# --- processes -------------------------------------------------------------------------


def start_server(name: str, argv: list[str], port: int, log: Path, cpu: int) -> Child:
    """Start ``argv`` (tied to our lifetime), wait until it answers a POST on ``port``, pin
    it to ``cpu``."""
    child = spawn(name, argv, os.environ, log)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        if child.exited() is not None:
            raise RuntimeError(f"{name} exited with {child.exited()}:\n{log_tail(log)}")
        with contextlib.suppress(OSError, http.client.HTTPException):
            request(port, "POST", PATH, {"content-type": "application/json"}, b"{}")
            break
        if time.monotonic() > deadline:
            stop(child)
            raise RuntimeError(f"{name} did not answer within {READY_TIMEOUT_S:.0f}s")
        time.sleep(0.05)
    pin(child.pid, cpu)
    return child


# --- the edge's answers ----------------------------------------------------------------


def capture_hit(port: int, user: User) -> CapturedAnswer:
    """Fill the users' shared entry, then the edge's HIT answer, as the app sent it."""
    for _ in range(2):
        reply = request(port, "POST", PATH, user.headers, user.body)
        if reply.status != 200:
            raise RuntimeError(f"edge answered {reply.status}: {reply.body[:300]!r}")
    if reply.header("x-cache") != "HIT":
        raise RuntimeError(f"second request not a hit: X-Cache {reply.header('x-cache')}")
    kept = [(k.lower(), v) for k, v in reply.headers if k.lower() not in SERVER_HEADERS]
    return CapturedAnswer(reply.status, kept, reply.body)


def cache_entries(port: int) -> int:
    """The edge's ``perso_edge_cache_entries`` gauge, from its ``/metrics``."""
    reply = request(port, "GET", "/metrics", {}, b"")
    for line in reply.body.decode().splitlines():
        if line.startswith("perso_edge_cache_entries"):
            return int(float(line.rsplit(" ", 1)[1]))
    raise RuntimeError("the edge's /metrics has no perso_edge_cache_entries")


def sample_answers(port: int, users: list[User]) -> tuple[Counter[str], int]:
    """X-Cache of every user's answer, and how many were rate limited."""
    seen: Counter[str] = Counter()
    limited = 0
    for user in users:
        reply = request(port, "POST", PATH, user.headers, user.body)
        seen[reply.header("x-cache") or f"status {reply.status}"] += 1
        limited += bool(json.loads(reply.body).get("metadata", {}).get("rate_limited"))
    return seen, limited


# Counters of the edge's /metrics the personal hit is checked by.
COUNTERS = {
    "perso_edge_ranked_here_total": "ranked_here",
    "perso_edge_ranked_from_bank_total": "ranked_from_bank",
    "perso_edge_pool_fills_total": "pool_fills",
    "perso_edge_user_fetches_total": "user_fetches",
    "perso_edge_rate_limited_total": "rate_limited",
}
ANSWERS = "perso_edge_answers_total"


def edge_counters(port: int) -> Counter[str]:
    """The edge's counters the personal hit is checked by, and its answers by how they
    were served (``hit``, ``miss``, ``stale``, ...), from its ``/metrics``."""
    reply = request(port, "GET", "/metrics", {}, b"")
    out: Counter[str] = Counter()
    for line in reply.body.decode().splitlines():
        name, _, rest = line.partition("{")
        if name in COUNTERS:
            out[COUNTERS[name]] = int(float(line.rsplit(" ", 1)[1]))
        elif name == ANSWERS:
            served = rest.split('served="', 1)[1].split('"', 1)[0]
            out[served] = int(float(line.rsplit(" ", 1)[1]))
    if "ranked_here" not in out:
        raise RuntimeError("the edge's /metrics has no perso_edge_ranked_here")
    return out


@dataclass(frozen=True)
class Ranked:
    """Every power user's answer to one request each, as a client sees them."""

    x_cache: Counter[str]
    tiers: Counter[str]  # metadata.tier
    rate_limited: int
    answer_bytes: int


def ranked_answers(port: int, users: list[User]) -> Ranked:
    """One request of every user: X-Cache, ``metadata.tier`` and rate limiting of each."""
    x_cache: Counter[str] = Counter()
    tiers: Counter[str] = Counter()
    limited = 0
    size = 0
    for user in users:
        reply = request(port, "POST", PATH, user.headers, user.body)
        if reply.status != 200:
            raise RuntimeError(f"edge answered {reply.status}: {reply.body[:300]!r}")
        metadata = json.loads(reply.body)["metadata"]
        x_cache[reply.header("x-cache") or "none"] += 1
        tiers[metadata.get("tier", "none")] += 1
        limited += bool(metadata.get("rate_limited"))
        size = len(reply.body)
    return Ranked(x_cache, tiers, limited, size)


async def pool_candidates(ends: Endpoints, user: User, fill_items: int) -> int:
    """How many candidates the origin's pool fill holds for ``user``'s segment (power),
    asked as an edge asks for it (``edge.serve.pool_fill.pool_fill``)."""
    origin = OriginClient(ends.origin_url, timeout_s=10.0, token=ends.origin_token)
    try:
        body = PersonalizeRequest.model_validate_json(user.body)
        constraints = Constraints(count=fill_items, exclude_items=[])
        _, pool = await origin.pools(
            as_fill(body, constraints), audience=Shared(Segment.POWER.value)
        )
    finally:
        await origin.aclose()
    return len(pool)


@dataclass(frozen=True)
class Sample:
    loaded: Load  # ``connections`` connections: throughput, and latency under it
    one: Load  # one connection: the latency of one request at a time
    warmup: Load

    @property
    def requests(self) -> int:
        """Every request wrk counted as answered, its warm-up included."""
        return self.warmup.requests + self.loaded.requests + self.one.requests


@dataclass(frozen=True)
class Bench:
    wrk: str
    script: Path
    seconds: int
    connections: int

    def measure(self, port: int, server: list[int]) -> Sample:
        def run(seconds: int, connections: int) -> Load:
            return run_wrk(
                self.wrk, self.script, port, seconds=seconds, connections=connections, server=server
            )

        warmup = run(WARMUP_S, self.connections)
        return Sample(run(self.seconds, self.connections), run(ONE_CONNECTION_S, 1), warmup)


# --- nginx -----------------------------------------------------------------------------


def _nginx_value(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def nginx_conf(root: Path, port: int, answer: CapturedAnswer) -> str:
    headers = "".join(
        f"            add_header {name} {_nginx_value(value)} always;\n"
        for name, value in answer.headers
        if name != "content-type"
    )
    user = ""
    if os.geteuid() == 0:  # its worker drops root; Debian has no group called nobody
        nobody = pwd.getpwnam("nobody")
        user = f"user {nobody.pw_name} {grp.getgrgid(nobody.pw_gid).gr_name};"
    temp = "\n".join(
        f"    {kind}_temp_path {root}/{kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""{user}
worker_processes 1;
daemon off;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
{temp}
    sendfile on;
    tcp_nopush on;
    open_file_cache max=16;
    keepalive_requests 1000000;
    etag off;
    server_tokens off;
    server {{
        listen 127.0.0.1:{port};
        root {root}/www;
        default_type {dict(answer.headers).get("content-type", "application/json")};
        location = {PATH} {{
            error_page 405 =200 $uri;
{headers}        }}
    }}
}}
"""


def prepare_nginx(root: Path, port: int, answer: CapturedAnswer) -> None:
    page = root / "www" / PATH.lstrip("/")
    page.parent.mkdir(parents=True)
    page.write_bytes(answer.body)
    (root / "nginx.conf").write_text(nginx_conf(root, port, answer))
    for path in (root, *root.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)


# --- the run ---------------------------------------------------------------------------

# Measured in this order in every round: the edge's two hits between its two Python
# baselines.
TARGETS = ("raw_asgi", "edge", "personal", "fastapi", "nginx")
LABELS = {
    "edge": "edge",
    "personal": "personal",
    "raw_asgi": "raw ASGI",
    "fastapi": "FastAPI",
    "nginx": "nginx",
}
PREFIX = {
    "edge": "",
    "personal": "personal_",
    "raw_asgi": "raw_asgi_",
    "fastapi": "fastapi_",
    "nginx": "nginx_",
}


class Unavailable(Exception):
    """A baseline that cannot be measured in this run (missing tool, failed start)."""


@dataclass
class Figures:
    samples: list[Sample] = field(default_factory=list)
    unavailable: str | None = None

    @property
    def median(self) -> Sample | None:
        """The round of the median requests/s (the lower of the middle two for an even
        count): the figure reported, the others' range beside it."""
        if not self.samples:
            return None
        ordered = sorted(self.samples, key=lambda s: s.loaded.rps)
        return ordered[(len(ordered) - 1) // 2]

    def rps_range(self) -> list[float]:
        return [min(s.loaded.rps for s in self.samples), max(s.loaded.rps for s in self.samples)]


@dataclass
class HitCheck:
    """What the edge's answers were during its runs."""

    x_cache: Counter[str] = field(default_factory=Counter)  # every user's answer after a run
    rate_limited: int = 0
    entries_added: int = 0  # new cache entries during the runs: each one a miss

    def all_hits(self) -> bool:
        return set(self.x_cache) == {"HIT"} and not self.rate_limited and not self.entries_added


@dataclass
class PersonalCheck:
    """What the edge's personal answers were during its runs: its counters' changes over
    each run (warm-up included), and every user's answer after each run."""

    requests: int = 0  # answered, as wrk counted them
    counted: Counter[str] = field(default_factory=Counter)  # the edge's counters' changes
    x_cache: Counter[str] = field(default_factory=Counter)
    tiers: Counter[str] = field(default_factory=Counter)
    rate_limited: int = 0
    slack: int = 0  # answers wrk may not have counted: one per connection and run
    answer_bytes: int = 0
    # Realistic mode: the pools refreshed in the background as their TTL says (no
    # request waits for it), and the model updates sent meanwhile
    # (``benchmarks.model_updates``).
    realistic: bool = False
    updates: Sent = field(default_factory=Sent)

    @property
    def bank_share(self) -> float | None:
        """The share of the ranked answers served a run of their user's bank."""
        ranked = self.counted["ranked_here"]
        return round(self.counted["ranked_from_bank"] / ranked, 3) if ranked else None

    def all_ranked_here(self) -> bool:
        c = self.counted
        ranked = c["ranked_here"]
        mine = {"ranked_here", "ranked_from_bank", "hit"}
        if self.realistic:
            mine.add("pool_fills")  # pools refreshed in the background, as their TTL says
        others = sum(v for k, v in c.items() if k not in mine)
        return (
            self.requests <= ranked <= self.requests + self.slack
            and c["hit"] == ranked
            and others == 0
            and set(self.x_cache) == {"HIT"}
            and set(self.tiers) == {"edge"}
            and not self.rate_limited
        )


@dataclass
class Run:
    """Every target, measured with the same wrk script and the same answer; the personal
    hit with the power users' own script."""

    bench: Bench
    users: list[User]
    answer: CapturedAnswer
    root: Path
    cpu: int  # the servers' core
    nginx_bin: str | None
    personal_bench: Bench
    power_users: list[User]
    hits: HitCheck = field(default_factory=HitCheck)
    personal_hits: PersonalCheck = field(default_factory=PersonalCheck)
    # Realistic mode: what sends the power users' clicks during their runs.
    updates: Callable[[int], ModelUpdates] | None = None

    def edge(self, port: int, pid: int) -> Sample:
        before = cache_entries(port)
        sample = self.bench.measure(port, process_tree(pid))
        seen, limited = sample_answers(port, self.users)
        self.hits.x_cache.update(seen)
        self.hits.rate_limited += limited
        self.hits.entries_added += cache_entries(port) - before
        return sample

    def personal(self, port: int, pid: int) -> Sample:
        warmed = ranked_answers(port, self.power_users)  # the pool and every user's state
        if set(warmed.tiers) != {"edge"}:
            raise RuntimeError(f"power users not ranked at the edge: {dict(warmed.tiers)}")
        before = edge_counters(port)
        updates = self.updates(port) if self.updates is not None else None
        if updates is not None:
            updates.start()
        try:
            sample = self.personal_bench.measure(port, process_tree(pid))
        finally:
            sent = updates.stop() if updates is not None else Sent()
        counted = edge_counters(port)
        counted.subtract(before)
        check = self.personal_hits
        check.realistic = updates is not None
        check.updates.updates += sent.updates
        check.updates.failed += sent.failed
        check.updates.answers += sent.answers
        check.requests += sample.requests
        check.slack += 3 * self.personal_bench.connections
        check.counted.update(+counted)  # what changed: no counter goes down
        seen = ranked_answers(port, self.power_users)
        check.x_cache.update(seen.x_cache)
        check.tiers.update(seen.tiers)
        check.rate_limited += seen.rate_limited
        check.answer_bytes = seen.answer_bytes
        return sample

    def python(self, kind: str) -> Sample:
        answer = self.root / "answer.json"
        answer.write_text(json.dumps(self.answer.to_json()))
        port = free_port()
        argv = [sys.executable, "-m", "benchmarks.raw_asgi", kind, str(answer), str(port)]
        return self._baseline(kind, argv, port, self.root / f"{kind}.log")

    def nginx(self) -> Sample:
        if self.nginx_bin is None:
            raise Unavailable("nginx is not installed (make bench-tools)")
        # Its own directory, readable by nginx's unprivileged worker.
        with tempfile.TemporaryDirectory(prefix="edge-hit-nginx-") as tmp:
            root = Path(tmp)
            port = free_port()
            prepare_nginx(root, port, self.answer)
            argv = [self.nginx_bin, "-p", tmp, "-c", f"{tmp}/nginx.conf", "-e", f"{tmp}/error.log"]
            return self._baseline("nginx", argv, port, root / "nginx.out")

    def _baseline(self, name: str, argv: list[str], port: int, log: Path) -> Sample:
        try:
            server = start_server(name, argv, port, log, self.cpu)
        except (OSError, RuntimeError) as exc:
            raise Unavailable(f"{name} did not start: {exc}") from exc
        try:
            reply = request(port, "POST", PATH, self.users[0].headers, self.users[0].body)
            if reply.status != self.answer.status or reply.body != self.answer.body:
                raise Unavailable(f"{name} does not send the captured answer ({reply.status})")
            return self.bench.measure(port, process_tree(server.pid))
        finally:
            stop(server)


@dataclass
class Results:
    targets: dict[str, Figures]
    hits: HitCheck | None
    answer_bytes: int
    personal_hits: PersonalCheck | None = None
    pool_candidates: int | None = None


def measure_all(
    *,
    edge_port: int,
    edge_pid: int,
    users: list[User],
    power_users: list[User],
    pool_size: int,
    tools: dict[str, str | None],
    root: Path,
    args: argparse.Namespace,
    cpu: int,
    updates: Callable[[int], ModelUpdates] | None = None,
) -> Results:
    answer = capture_hit(edge_port, users[0])
    targets = {target: Figures() for target in TARGETS}
    if tools["wrk"] is None:
        for figures in targets.values():
            figures.unavailable = "wrk is not installed (make bench-tools)"
        return Results(targets, None, len(answer.body))
    script = root / "requests.lua"
    script.write_text(wrk_script(users))
    bench = Bench(tools["wrk"], script, args.seconds, args.connections)
    power_script = root / "power.lua"
    power_script.write_text(wrk_script(power_users))
    personal = Bench(tools["wrk"], power_script, args.seconds, args.connections)
    run = Run(
        bench, users, answer, root, cpu, tools["nginx"], personal, power_users, updates=updates
    )
    measure: dict[str, Callable[[], Sample]] = {
        "raw_asgi": lambda: run.python("raw"),
        "edge": lambda: run.edge(edge_port, edge_pid),
        "personal": lambda: run.personal(edge_port, edge_pid),
        "fastapi": lambda: run.python("fastapi"),
        "nginx": run.nginx,
    }
    for n in range(1, args.rounds + 1):
        for target, figures in targets.items():
            if figures.unavailable is not None:
                continue
            try:
                figures.samples.append(measure[target]())
            except Unavailable as exc:
                figures.unavailable = str(exc)
                continue
            print(f"  round {n}  {row(LABELS[target], figures.samples[-1])}", flush=True)
    return Results(targets, run.hits, len(answer.body), run.personal_hits, pool_size)


def row(label: str, sample: Sample) -> str:
    loaded, one = sample.loaded, sample.one
    return (
        f"{label:<9} {loaded.rps:>7.0f} {loaded.p50_ms:>7.2f} {loaded.p99_ms:>7.2f} "
        f"{one.p50_ms:>7.3f} {one.p99_ms:>7.3f} {loaded.server_share:>6.0%} "
        f"{loaded.cpu_us_per_request:>7.0f} {loaded.wrk_cpu_s / loaded.wall_s:>5.0%}"
        + (f"  {loaded.non_2xx} non-2xx" if loaded.non_2xx or one.non_2xx else "")
        + (f"  {loaded.socket_errors} socket errors" if loaded.socket_errors else "")
    )


HEADER = (
    f"{'target':<9} {'rps':>7} {'p50 ms':>7} {'p99 ms':>7} {'1c p50':>7} {'1c p99':>7} "
    f"{'server':>6} {'us/req':>7} {'wrk':>5}"
)


def cpus() -> tuple[int, int]:
    """The servers' core and the load generator's core."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        print(f"only core {allowed[0]} available: servers and wrk share it")
        return allowed[0], allowed[0]
    return allowed[0], allowed[1]


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@contextlib.contextmanager
def affinity(cpu: int) -> Iterator[None]:
    """This process, and so the stack and every wrk it starts, on ``cpu``."""
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)


def run(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    print(f"machine: {machine()}; load average {loadavg()}")
    tools = {"wrk": tool("wrk"), "nginx": tool("nginx")}
    for name, path in tools.items():
        print(f"{name}: {path or 'not installed (make bench-tools installs it)'}")
    server_cpu, load_cpu = cpus()
    key = secrets.token_urlsafe(32)
    with tempfile.TemporaryDirectory(prefix="edge-hit-") as tmp, affinity(load_cpu):
        root = Path(tmp)
        settings = Settings(
            data_dir=root / "stack",
            catalog_size=CATALOG_SIZE,
            text_encoder="hashing",
            regions=(REGION,),
            region=REGION,
            identity_keys=SecretStr(key),
            log_level="warning",
            **({} if args.realistic else BEST_CASE),
        )
        print(
            f"stack: Redis, catalog of {CATALOG_SIZE}, origin, {settings.workers} stream "
            f"worker(s), one edge (pools of {settings.pool_size}, refreshed after "
            f"{settings.edge_pool_ttl_s:g} s; dimension {settings.embedding_dim})"
        )
        if args.realistic:
            print(
                f"realistic mode: the shipped settings; {POWER_INTERACTION_SHARE:.0%} of the "
                "power users' answers followed by a change of the user's model, sent to the "
                "edge as the stream workers send it (benchmarks.model_updates)"
            )
        else:
            print(f"best case: settings changed {BEST_CASE}")
        # The stack's calls are async, the measurement is not: one loop, driven from here,
        # so that every process is started from the main thread (see perso.process).
        loop = asyncio.new_event_loop()
        stack = Stack(settings, free_ports=True, redis_persistent=False, say=indent)
        try:
            ends = loop.run_until_complete(stack.start())
            edge_port = urlsplit(ends.edges[REGION]).port
            assert edge_port is not None
            edge = find_edge_pid(edge_port)
            pin(edge, server_cpu)
            power_users = mint_users(key, USERS, Segment.POWER)
            pool_size = loop.run_until_complete(
                pool_candidates(ends, power_users[0], settings.edge_fill_items)
            )
            print(f"the origin's pool for the power users' segment: {pool_size} candidates")
            if tools["wrk"] is not None:
                print(
                    f"servers on core {server_cpu}, wrk -t1 on core {load_cpu}; per target and "
                    f"round: {WARMUP_S} s warm-up, {args.seconds} s with -c{args.connections}, "
                    f"{ONE_CONNECTION_S} s with -c1 (1c); server: its share of a core, us/req: "
                    f"its CPU time per request"
                )
                print(f"           {HEADER}")
            results = measure_all(
                edge_port=edge_port,
                edge_pid=edge,
                users=mint_users(key, USERS, Segment.NEW),
                power_users=power_users,
                pool_size=pool_size,
                tools=tools,
                root=root,
                args=args,
                cpu=server_cpu,
                updates=updates_of(ends, settings, power_users) if args.realistic else None,
            )
        finally:
            loop.run_until_complete(stack.stop())
            loop.close()
    print(f"load average after: {loadavg()}")
    report(results, args, started)


def updates_of(
    ends: Endpoints, settings: Settings, users: list[User]
) -> Callable[[int], ModelUpdates]:
    """What sends the power users' model updates to the stack's edges while the edge on a
    port ranks their slates."""

    def updates(port: int) -> ModelUpdates:
        return ModelUpdates(
            redis_url=ends.redis_url,
            regions=settings.regions,
            users=[u.user_id for u in users],
            dim=settings.embedding_dim,
            prior_scale=settings.user_prior_scale,
            ranked=lambda: edge_counters(port)["ranked_here"],
        )

    return updates


def indent(line: str) -> None:
    print(f"  {line}", flush=True)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else round(a / b, 3)


def draw(path: Path, best: dict[str, Sample | None], connections: int) -> None:
    figure.plot(
        path,
        {
            LABELS[target]: figure.TargetFigures(
                sample.loaded.rps,
                sample.loaded.p50_ms,
                sample.loaded.p99_ms,
                sample.one.p50_ms,
                sample.one.p99_ms,
            )
            for target, sample in best.items()
            if sample is not None
        },
        connections,
    )


def report(results: Results, args: argparse.Namespace, started: float) -> None:
    best = {target: figures.median for target, figures in results.targets.items()}
    print(
        f"\nPOST {PATH}, {USERS} users in turn, answer {results.answer_bytes} bytes; "
        f"median of {args.rounds} rounds (by requests/s):"
    )
    print(HEADER + "  vs raw ASGI")
    raw = best["raw_asgi"]
    for target, figures in results.targets.items():
        sample = best[target]
        if sample is None:
            print(f"{LABELS[target]:<9} not measured: {figures.unavailable}")
            continue
        versus = f"  {sample.loaded.rps / raw.loaded.rps:.2f}x" if raw else ""
        print(row(LABELS[target], sample) + versus)
        if figures.unavailable:
            print(f"          then: {figures.unavailable}")
        if sample.loaded.server_share < BUSY:
            print(
                f"          the server used {sample.loaded.server_share:.0%} of its core: "
                "other processes on the machine took the rest, or wrk was the limit"
            )
    if best["nginx"] is not None:
        print(f"nginx: {NGINX_METHOD}")
    hits = results.hits
    if hits is not None:
        print(
            f"edge answers: {'all hits' if hits.all_hits() else 'NOT ALL HITS'} (X-Cache of "
            f"every user's answer after each run {dict(hits.x_cache)}, rate limited "
            f"{hits.rate_limited}, cache entries added during the runs {hits.entries_added})"
        )
    personal = results.personal_hits
    if personal is not None and best["personal"] is not None:
        verdict = "all ranked at the edge" if personal.all_ranked_here() else "NOT ALL RANKED HERE"
        print(
            f"personal answers ({results.pool_candidates}-candidate pool, "
            f"{personal.answer_bytes} bytes): {verdict} (wrk counted {personal.requests}; "
            f"the edge's counters over the runs {dict(personal.counted)}; after each run "
            f"X-Cache {dict(personal.x_cache)}, tier {dict(personal.tiers)}, rate limited "
            f"{personal.rate_limited}); served from the user's bank: {personal.bank_share}"
        )
        if personal.realistic:
            sent = personal.updates
            print(
                f"model updates sent to the edge during the personal runs: {sent.updates} "
                f"({sent.updates / max(sent.answers, 1):.2f} per answer ranked; "
                f"{sent.failed} failed to publish)"
            )
    limit = LIMITS[TIER][PERSONALIZE].per_user_rps
    for target in ("edge", "personal"):
        sample = best[target]
        if sample is not None and sample.loaded.rps / USERS > limit:
            print(f"WARNING: the {LABELS[target]} users' requests were over their rate limit")

    def rps(target: str) -> float | None:
        sample = best[target]
        return sample.loaded.rps if sample else None

    def cpu(target: str) -> float | None:
        sample = best[target]
        return sample.loaded.cpu_us_per_request if sample else None

    ratio = _ratio(rps("edge"), rps("raw_asgi"))
    cpu_ratio = _ratio(cpu("raw_asgi"), cpu("edge"))
    if ratio is not None:
        print(
            f"edge / raw ASGI: {ratio:.2f}x in requests/s, {cpu_ratio:.2f}x in requests per "
            f"CPU second (target {TARGET_RATIO}x)"
        )
    personal_ratio = _ratio(rps("personal"), rps("edge"))
    personal_cpu = _ratio(cpu("personal"), cpu("edge"))
    if personal_ratio is not None:
        print(
            f"personal / shared hit: {personal_ratio:.2f}x in requests/s; CPU per request "
            f"{personal_cpu:.2f}x the shared hit's (target at most {TARGET_PERSONAL_CPU}x)"
        )
    draw(args.out / "edge_hit.png", best, args.connections)
    save_and_finish(
        {
            **per_target(results, best),
            "ratio_vs_raw_asgi": ratio,
            "cpu_ratio_vs_raw_asgi": cpu_ratio,
            "target_ratio_vs_raw_asgi": TARGET_RATIO,
            "fastapi_ratio_vs_raw_asgi": _ratio(rps("fastapi"), rps("raw_asgi")),
            "ratio_vs_nginx": _ratio(rps("edge"), rps("nginx")),
            "personal_ratio_vs_shared": personal_ratio,
            "personal_cpu_per_request_vs_shared": personal_cpu,
            "target_personal_cpu_vs_shared": TARGET_PERSONAL_CPU,
            "personal_pool_candidates": results.pool_candidates,
            "personal_answer_bytes": personal.answer_bytes if personal else None,
            "personal_all_ranked_here": personal.all_ranked_here() if personal else None,
            "personal_edge_counters": dict(personal.counted) if personal else None,
            "personal_bank_share": personal.bank_share if personal else None,
            "realistic": args.realistic,
            "updates_per_personal_answer": (
                round(personal.updates.updates / max(personal.updates.answers, 1), 3)
                if personal and personal.realistic
                else None
            ),
            "updates_failed": personal.updates.failed if personal and personal.realistic else None,
            "edge_all_hits": hits.all_hits() if hits else None,
            "edge_x_cache": dict(hits.x_cache) if hits else None,
            "connections": args.connections,
            "measured_seconds": args.seconds,  # each measured run; "seconds": the whole
            "rounds": args.rounds,
            "nginx_method": "POST, error_page 405 =200",
        },
        args.out / "edge_hit.json",
        args.out / "edge_hit.png",
        started,
    )


def per_target(results: Results, chosen: dict[str, Sample | None]) -> dict[str, Any]:
    """Each target's figures from its median round, under its prefix, and the range of its
    requests/s over every round."""
    out: dict[str, Any] = {}
    for target, sample in chosen.items():
        p = PREFIX[target]
        loaded, one = (sample.loaded, sample.one) if sample else (None, None)
        out[f"{p}rps"] = round(loaded.rps) if loaded else None
        out[f"{p}p50_ms"] = round(loaded.p50_ms, 3) if loaded else None
        out[f"{p}p99_ms"] = round(loaded.p99_ms, 3) if loaded else None
        out[f"{p}one_connection_p50_ms"] = round(one.p50_ms, 3) if one else None
        out[f"{p}one_connection_p99_ms"] = round(one.p99_ms, 3) if one else None
        out[f"{p}cpu_us_per_request"] = round(loaded.cpu_us_per_request, 1) if loaded else None
        samples = results.targets[target].samples
        out[f"{p}rps_range"] = (
            [round(x) for x in results.targets[target].rps_range()] if samples else None
        )
        out[f"{p}non_2xx"] = (
            sum(s.loaded.non_2xx + s.one.non_2xx for s in samples) if samples else None
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=8, help="measured run (8)")
    parser.add_argument("--connections", type=int, default=32, help="wrk connections (32)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over all targets (3)")
    parser.add_argument(
        "--realistic",
        action="store_true",
        help="the shipped settings (workers, pool size and TTL) and the power users' clicks "
        "at the traffic model's rate during their runs",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=results_dir("edge_hit"),
        help="where the JSON and PNG go (.perso/bench/edge_hit)",
    )
    args = parser.parse_args()
    # A SIGTERM unwinds like an exception: every server this run started is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    run(args)


if __name__ == "__main__":
    main()
