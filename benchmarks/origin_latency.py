"""Origin ``/v1/personalize`` latency and throughput at 10K and 100K items, over HTTP.

For each catalog size the benchmark starts a real stack without edges' traffic (embedded
Redis, the sample catalog in Qdrant local mode, the origin as its own process, no stream
workers), prepares users and then measures from a client in this process:

- one request at a time (the figure the issue's target is about: p99 under 10 ms at 100K
  items, against Metarank's published 20-30 ms for re-ranking): the client's own timing
  around each request on a keep-alive connection (standard-library HTTP client), plus the
  origin's reported ``latency_ms``;
- throughput with 8 concurrent connections for a few seconds, by wrk (``make bench-tools``;
  a C load generator, so that the client's own CPU is not what is measured: httpx cost about
  2 ms of Python a request here, most of a core at the origin's rate), each request a user and
  filters drawn as below from 2,000 prepared ones, in turn; with it the origin processes' CPU
  time per request. With ``--origins N`` the stack runs N origin processes (``perso up
  --origins``: the first owns the catalog, the others are its replicas) and the 8
  connections are spread over them, as the edges' rotation spreads fills.

Each is measured in ``RUNS`` runs (3); the figures reported are the median run's, with the
range over the runs beside them (``..._range``): the p99 of the median run of the
one-at-a-time requests, the requests/s of the median concurrent run.

Requests: 20 results from the default 500 candidates; a third of the users are cold, a
third have an embedding, a third an embedding and a session (feedback posted first); one
request in four carries filters (categories or a price range), one in two asks for
explanations. The catalog is ingested on the first run into ``.perso/bench/`` and reused
afterwards (100K items take a few minutes to ingest the first time).

A catalog of a million items or more is ingested with feature-hashed title vectors (the
run says so; MiniLM would take 20 minutes for the titles alone). With Qdrant's local mode
(the default) a million does not fit a 24 GB machine: the ingesting process held 7.8 GB
at 200,000 items, and the origin opens the same store in memory again; it needs a Qdrant
server (``QDRANT_URL``).

Run: ``make bench-tools && .venv/bin/python -m benchmarks.origin_latency [--sizes
10000,100000] [--origins 1] [--out DIR]`` (``--sizes 1000000`` for a million);
``origin_latency.json`` and ``.png`` (the latency CDFs per size) go to ``--out`` (default
``.perso/bench/origin_latency``).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import secrets
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np
from pydantic import SecretStr

from benchmarks.bench_processes import find_server_pid, tool
from benchmarks.fault_load import get_all
from benchmarks.report import machine, percentile, quantiles, results_dir, save_and_finish
from benchmarks.wrk_load import Load, requests_script, run_wrk
from config.settings import Settings
from origin.learned.user_models import UserRecord, encode_record
from perso import plots
from perso.stack import Stack
from protocol import keys
from protocol.vectors import unpack_vector
from redis_client.client import RedisClient, connect
from relevance.user_model import UserModel

METARANK_PUBLISHED_MS = 20.0  # low end of the 20-30 ms Metarank publishes for re-ranking
SEQUENTIAL_REQUESTS = 500  # per run
RUNS = 3
HASHED_TITLES_FROM = 1_000_000
WARMUP_REQUESTS = 150
CONCURRENCY = 8
CONCURRENT_SECONDS = 6
# The concurrent requests, drawn as the one-at-a-time ones and sent in turn.
PREPARED_REQUESTS = 2000
USERS_PER_KIND = 200
CATEGORIES = ("electronics", "books", "home-kitchen", "shoes", "beauty", "grocery")


def request_body(rng: np.random.Generator, user: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "user_id": user,
        "context": {
            "page_type": str(rng.choice(["home", "category", "item_detail", "search"])),
            "device": str(rng.choice(["mobile", "desktop", "tablet"])),
        },
        "constraints": {"count": 20},
        "options": {"include_explanation": bool(rng.random() < 0.5)},
    }
    if rng.random() < 0.25:
        if rng.random() < 0.5:
            body["constraints"]["categories"] = [str(rng.choice(CATEGORIES))]
        else:
            low = float(rng.choice([5, 10, 20, 50]))
            body["constraints"]["price_range"] = {"min": low, "max": low * 4}
    return body


async def prepare_users(
    redis: RedisClient, client: httpx.AsyncClient, size: int, dim: int, rng: np.random.Generator
) -> list[str]:
    """Cold users, users with a model, users with a model and a session."""
    width = max(6, len(str(size - 1)))
    users = [f"cold-{n}" for n in range(USERS_PER_KIND)]
    for kind in ("known", "session"):
        for n in range(USERS_PER_KIND):
            user = f"{kind}-{n}"
            picks = rng.integers(0, size, 3)
            ids = [f"it-{int(p):0{width}d}" for p in picks]
            raw = await get_all(redis, [keys.item_vector(i) for i in ids])
            vectors = [unpack_vector(r, dim) for r in raw if isinstance(r, bytes)]
            mean = np.mean(vectors, axis=0)
            model = UserModel(
                (mean / np.linalg.norm(mean)).astype(np.float32),
                np.full(dim, 0.1 / dim, np.float32),
            )
            record = UserRecord(version=1, updated_ms=int(time.time() * 1000), model=model)
            await redis.set(keys.user_record(user), encode_record(record, dim))
            if kind == "session":
                feedback = [{"item_id": i, "action": "click", "duration_ms": 8000} for i in ids]
                answer = await client.post(
                    "/v1/feedback", json={"user_id": user, "feedback": feedback}
                )
                answer.raise_for_status()
            users.append(user)
    return users


def sequential(
    origin_url: str, token: str, users: list[str], rng: np.random.Generator, n: int
) -> tuple[list[float], list[float]]:
    """One request at a time on one keep-alive connection, with the standard library's
    HTTP client: its own cost per request is a fraction of a millisecond (httpx's is
    about 2 ms of Python here), so the figure is the origin's, plus the network stack."""
    url = urlsplit(origin_url)
    connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=10)
    headers = {"content-type": "application/json", "authorization": f"Bearer {token}"}
    client_ms: list[float] = []
    server_ms: list[float] = []
    try:
        for _ in range(n):
            payload = json.dumps(request_body(rng, str(rng.choice(users)))).encode()
            started = time.perf_counter()
            connection.request("POST", "/v1/personalize", body=payload, headers=headers)
            response = connection.getresponse()
            raw = response.read()
            elapsed = (time.perf_counter() - started) * 1000
            if response.status != 200:
                raise RuntimeError(f"personalize answered {response.status}: {raw[:200]!r}")
            client_ms.append(elapsed)
            server_ms.append(float(json.loads(raw)["metadata"]["latency_ms"]))
    finally:
        connection.close()
    return client_ms, server_ms


def prepared_requests(
    token: str, users: list[str], rng: np.random.Generator
) -> list[tuple[str, bytes]]:
    """The concurrent phase's requests: each a user and filters drawn as one at a time."""
    return [
        (token, json.dumps(request_body(rng, str(rng.choice(users)))).encode())
        for _ in range(PREPARED_REQUESTS)
    ]


@dataclass(frozen=True)
class Throughput:
    """One concurrent run over every origin: requests/s, and the origins' CPU per request."""

    rps: float
    cpu_us_per_request: float
    origin_core_share: float  # the origins' CPU time over the run's wall time, summed
    non_2xx: int


def concurrent(wrk: str, script: Path, ports: list[int], pids: list[int]) -> Throughput:
    """``CONCURRENCY`` connections spread over the origins on ``ports``, a wrk each at once,
    for ``CONCURRENT_SECONDS``."""
    share = [CONCURRENCY // len(ports) + (n < CONCURRENCY % len(ports)) for n in range(len(ports))]
    with ThreadPoolExecutor(len(ports)) as pool:
        loads: list[Load] = list(
            pool.map(
                lambda n: run_wrk(
                    wrk,
                    script,
                    ports[n],
                    seconds=CONCURRENT_SECONDS,
                    connections=share[n],
                    server=[pids[n]],
                ),
                range(len(ports)),
            )
        )
    requests = sum(load.requests for load in loads)
    cpu = sum(load.server_cpu_s for load in loads)
    return Throughput(
        rps=sum(load.rps for load in loads),
        cpu_us_per_request=cpu / max(1, requests) * 1e6,
        origin_core_share=sum(load.server_share for load in loads),
        non_2xx=sum(load.non_2xx + load.socket_errors for load in loads),
    )


async def measure(
    size: int, root: Path, origins: int, wrk: str
) -> tuple[dict[str, Any], list[float], list[float]]:
    """The figures at ``size`` items, and the one-at-a-time samples: client and origin ms."""
    token = secrets.token_urlsafe(16)
    # From HASHED_TITLES_FROM items the titles' vectors are feature-hashed, not MiniLM's:
    # a million titles through MiniLM take 20 minutes on two cores; the unified vectors
    # the origin retrieves and ranks by have the same dimension either way.
    hashed = size >= HASHED_TITLES_FROM
    settings = Settings(
        data_dir=root / (f"origin-{size}-hashing" if hashed else f"origin-{size}"),
        catalog_size=size,
        workers=0,
        regions=("bench",),
        origin_token=SecretStr(token),
        log_level="warning",
        text_encoder="hashing" if hashed else "auto",
    )
    print(f"\n== {size} items ==")
    if hashed:
        print(f"settings changed: text_encoder=hashing (catalogs of {HASHED_TITLES_FROM:,}+)")
    async with Stack(settings, free_ports=True, origins=origins) as endpoints:
        redis = connect(endpoints.redis_url)
        async with httpx.AsyncClient(
            base_url=endpoints.origin_url,
            headers={"authorization": f"Bearer {token}"},
            timeout=10.0,
            limits=httpx.Limits(max_connections=CONCURRENCY),
        ) as client:
            rng = np.random.default_rng(size)
            users = await prepare_users(redis, client, size, settings.embedding_dim, rng)
            url = endpoints.origin_url
            sequential(url, token, users, rng, WARMUP_REQUESTS)
            runs = [sequential(url, token, users, rng, SEQUENTIAL_REQUESTS) for _ in range(RUNS)]
            urls = list(endpoints.origin_urls or (url,))
            ports = [urlsplit(u).port or 80 for u in urls]
            pids = [find_server_pid(port, "origin") for port in ports]
            with tempfile.TemporaryDirectory(prefix="origin-latency-") as tmp:
                script = Path(tmp) / "requests.lua"
                script.write_text(requests_script(prepared_requests(token, users, rng)))
                loads = [
                    await asyncio.to_thread(concurrent, wrk, script, ports, pids)
                    for _ in range(RUNS)
                ]
        await redis.aclose()
    by_p99 = sorted(runs, key=lambda run: percentile(run[0], 99))
    client_ms, server_ms = by_p99[(RUNS - 1) // 2]  # the median run
    p99s = [percentile(run[0], 99) for run in by_p99]
    rates = [load.rps for load in loads]
    load = sorted(loads, key=lambda x: x.rps)[(RUNS - 1) // 2]  # the median run
    rps = load.rps
    if any(x.non_2xx for x in loads):
        raise RuntimeError(f"the origin refused or failed {sum(x.non_2xx for x in loads)} requests")
    figures: dict[str, Any] = {
        "p50_ms": percentile(client_ms, 50),
        "p99_ms": percentile(client_ms, 99),
        "p99_ms_range": [round(p99s[0], 3), round(p99s[-1], 3)],
        "server_p50_ms": percentile(server_ms, 50),
        "server_p99_ms": percentile(server_ms, 99),
        "rps_one_at_a_time": len(client_ms) / (sum(client_ms) / 1000),
        "rps_concurrent": rps,
        "rps_concurrent_range": [round(min(rates)), round(max(rates))],
        "origins": origins,
        "origin_cpu_us_per_request": load.cpu_us_per_request,
        "origin_core_share": load.origin_core_share,
    }
    print(
        f"one at a time ({RUNS} runs of {SEQUENTIAL_REQUESTS} requests; the median run by "
        f"p99): client p50 {figures['p50_ms']:.2f} ms, p99 {figures['p99_ms']:.2f} ms (runs "
        f"{p99s[0]:.2f}-{p99s[-1]:.2f}); origin's own p50 {figures['server_p50_ms']:.2f} ms, "
        f"p99 {figures['server_p99_ms']:.2f} ms"
    )
    print(
        f"{CONCURRENCY} concurrent connections (wrk) over {origins} origin process(es), mixed "
        f"users and filters: {rps:.0f} rps (median of {RUNS} runs of {CONCURRENT_SECONDS} s; "
        f"{min(rates):.0f}-{max(rates):.0f}); the origins' CPU {load.cpu_us_per_request:.0f} "
        f"us a request, {load.origin_core_share:.2f} cores"
    )
    return figures, client_ms, server_ms


def label(size: int) -> str:
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


def plot(path: Path, samples: dict[str, tuple[list[float], list[float]]]) -> None:
    """Per catalog size: the CDFs of the client's and the origin's own timing, against the
    low end of Metarank's published figure."""
    with plots.figure(
        path, f"Origin /v1/personalize, one request at a time ({SEQUENTIAL_REQUESTS:,} each)"
    ) as [ax]:
        for n, (size, (client_ms, server_ms)) in enumerate(samples.items()):
            plots.cdf(ax, client_ms, f"{size} items, client", log_x=True, color=f"C{n}")
            plots.cdf(
                ax,
                server_ms,
                f"{size} items, origin's latency_ms",
                log_x=True,
                color=f"C{n}",
                linestyle=":",
            )
        ax.axvline(
            METARANK_PUBLISHED_MS,
            color="red",
            linestyle="--",
            label=f"Metarank, published ({METARANK_PUBLISHED_MS:.0f} ms; not run here)",
        )
        ax.set_xlim(right=METARANK_PUBLISHED_MS * 1.4)
        plots.labelled(ax, "latency CDF", "ms (log scale)", "share of requests")


async def run(sizes: list[int], root: Path, results: Path, origins: int) -> None:
    started = time.perf_counter()
    wrk = tool("wrk")
    if wrk is None:
        raise SystemExit("wrk is not installed: make bench-tools")
    print(f"machine: {machine()}")
    if origins != 1:
        print(f"origin processes: {origins} (perso up --origins {origins}; the default is 1)")
    out: dict[str, Any] = {"origins": origins}
    samples: dict[str, tuple[list[float], list[float]]] = {}
    for size in sizes:
        figures, client_ms, server_ms = await measure(size, root, origins, wrk)
        for name, value in figures.items():
            out[f"{name}_{label(size)}"] = value if isinstance(value, list) else round(value, 3)
        samples[label(size)] = (client_ms, server_ms)
    largest = label(max(sizes))
    out["metarank_published_ms"] = METARANK_PUBLISHED_MS
    out[f"ratio_p99_{largest}_vs_metarank"] = round(
        out[f"p99_ms_{largest}"] / METARANK_PUBLISHED_MS, 3
    )
    plot(results / "origin_latency.png", samples)
    save_and_finish(
        out,
        results / "origin_latency.json",
        results / "origin_latency.png",
        started,
        # the distributions, as 101 quantiles each (0 to 100%)
        {
            f"{name}_{size}": quantiles(values)
            for size, (client_ms, server_ms) in samples.items()
            for name, values in (("cdf_ms", client_ms), ("server_cdf_ms", server_ms))
        },
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="catalog sizes")
    parser.add_argument("--data", type=Path, default=Path(".perso/bench"), help="data root")
    parser.add_argument(
        "--out",
        type=Path,
        default=results_dir("origin_latency"),
        help="where the JSON and PNG go (.perso/bench/origin_latency)",
    )
    parser.add_argument(
        "--origins",
        type=int,
        default=1,
        help="origin processes the concurrent connections are spread over (1, perso up's)",
    )
    args = parser.parse_args()
    if not 1 <= args.origins <= CONCURRENCY:
        parser.error(f"--origins: 1 to {CONCURRENCY}, not {args.origins}")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    asyncio.run(run(sizes, args.data, args.out, args.origins))


if __name__ == "__main__":
    main()
