"""Request coalescing: a burst of concurrent requests for one cold key, and how many times
the edge asked the origin.

The real origin app (an embedded Redis, a 1,000-item sample catalog) and the real edge app
run in this process; the edge reaches the origin through ``httpx.ASGITransport`` behind a
transport that counts personalize calls. A burst of ``--burst`` requests from distinct new
users (one segment-keyed entry) arrives at once, for a fresh key each round:

- coalescing on (the edge as configured): one fill per key, the rest wait for it;
- coalescing off, the baseline, same run: ``PERSO_EDGE_COALESCE_WAIT_MS`` at its minimum,
  so every waiting request gives up at once and fetches for itself, as an edge without
  coalescing would.

Run: ``.venv/bin/python -m benchmarks.coalescing [--burst 200] [--rounds 5]``
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.report import finish, percentile
from config.settings import Settings
from edge.app import create_app as create_edge
from origin.app import create_app as create_origin
from origin.catalog.ingest import ensure_sample_catalog
from perso.redis_server import RedisServer
from protocol.identity import Claims, issue
from protocol.segments import Segment
from redis_client.client import connect

IDENTITY_KEY = "bench-identity-key-0123456789"
DEVICES = ("mobile", "desktop", "tablet", "tv")
PAGES = ("home", "search", "category", "item_detail")


class CountingTransport(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner
        self.personalize_calls = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/personalize":
            self.personalize_calls += 1
        return await self._inner.handle_async_request(request)


def token(user_id: str) -> str:
    now = int(time.time())
    claims = Claims(user_id, Segment.NEW, "premium", "bench", now, now + 3600)
    return issue(claims, IDENTITY_KEY.encode())


async def burst(
    edge: httpx.AsyncClient, transport: CountingTransport, round_no: int, size: int
) -> tuple[int, list[float], int]:
    """One burst for a cold key: (origin calls, latencies in ms, non-200 answers)."""
    page = PAGES[round_no % len(PAGES)]
    device = DEVICES[(round_no // len(PAGES)) % len(DEVICES)]
    context = {"page_type": page, "device": device, "geo": {"country": "JP"}}
    users = [f"b{round_no}-{n}" for n in range(size)]
    headers = {u: {"authorization": f"Bearer {token(u)}"} for u in users}
    before = transport.personalize_calls
    latencies: list[float] = []

    async def one(user: str) -> int:
        started = time.perf_counter()
        response = await edge.post(
            "/v1/personalize",
            json={"user_id": user, "context": context, "constraints": {"count": 10}},
            headers=headers[user],
        )
        latencies.append((time.perf_counter() - started) * 1000)
        return response.status_code

    statuses = await asyncio.gather(*(one(u) for u in users))
    return transport.personalize_calls - before, latencies, sum(s != 200 for s in statuses)


async def measure(settings: Settings, rounds: int, size: int, first_round: int) -> dict[str, float]:
    origin_app = create_origin(settings)
    transport = CountingTransport(httpx.ASGITransport(app=origin_app))
    edge_app = create_edge(settings, region="ap-northeast", origin_transport=transport)
    calls: list[int] = []
    latencies: list[float] = []
    errors = 0
    async with (
        origin_app.router.lifespan_context(origin_app),
        edge_app.fastapi.router.lifespan_context(edge_app.fastapi),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=edge_app), base_url="http://e") as edge,
    ):
        for n in range(first_round, first_round + rounds):
            made, took, failed = await burst(edge, transport, n, size)
            calls.append(made)
            latencies.extend(took)
            errors += failed
    return {
        "origin_calls_per_burst": sum(calls) / len(calls),
        "max_origin_calls": max(calls),
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "errors": errors,
    }


async def run(size: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp) / "redis", persistent=False).start()
        try:
            base = {
                "redis_url": server.url,
                "data_dir": Path(tmp) / "data",
                "catalog_size": 1000,
                "embedding_dim": 32,
                "identity_keys": IDENTITY_KEY,
                "origin_timeout_ms": 5000,
            }
            settings = Settings(**base)  # type: ignore[arg-type]
            redis = connect(server.url)
            try:
                await ensure_sample_catalog(settings, redis)
            finally:
                await redis.aclose()
            on = await measure(settings, rounds, size, first_round=0)
            off_settings = settings.model_copy(update={"edge_coalesce_wait_ms": 1})
            off = await measure(off_settings, rounds, size, first_round=rounds)
        finally:
            server.stop()
    print(f"a burst of {size} concurrent requests for one cold key, {rounds} rounds each:")
    print("                     origin calls/burst  max   p50 ms   p99 ms  errors")
    for name, fig in (("coalescing on", on), ("coalescing off", off)):
        print(
            f"  {name:<18} {fig['origin_calls_per_burst']:>18.1f} {fig['max_origin_calls']:>4.0f}"
            f" {fig['p50_ms']:>8.1f} {fig['p99_ms']:>8.1f} {fig['errors']:>7.0f}"
        )
    finish(
        {
            "burst": size,
            "rounds": rounds,
            "origin_calls_per_burst": on["origin_calls_per_burst"],
            "max_origin_calls": on["max_origin_calls"],
            "p50_ms": round(on["p50_ms"], 2),
            "p99_ms": round(on["p99_ms"], 2),
            "errors": on["errors"],
            "uncoalesced_origin_calls_per_burst": off["origin_calls_per_burst"],
            "uncoalesced_p50_ms": round(off["p50_ms"], 2),
            "uncoalesced_p99_ms": round(off["p99_ms"], 2),
            "origin_calls_saved_ratio": round(
                off["origin_calls_per_burst"] / max(on["origin_calls_per_burst"], 1e-9), 1
            ),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=200, help="concurrent requests (200)")
    parser.add_argument("--rounds", type=int, default=5, help="cold keys per mode (5)")
    args = parser.parse_args()
    asyncio.run(run(args.burst, args.rounds))


if __name__ == "__main__":
    main()
