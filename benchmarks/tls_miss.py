"""benchmarks.tls_miss: the edge's miss path over TLS against the same path over plain HTTP
(issue 30: the parts speak HTTPS to each other, ``config/tls.py``).

A stack of real processes (``perso.stack.Stack``: an embedded Redis, a 1,000-item catalog,
the origin and one edge, no worker, the shipped settings otherwise) is started once over
plain HTTP and once with certificates made by ``trustme`` (every part serving HTTPS and
verifying the others against the CA), both running at once, in ``--rounds`` rounds of two
new stacks. One client per stack (an httpx client with keep-alive connections, as a
shop's front end or a CDN holds them) sends ``--requests`` personalize requests through
its edge, the two stacks' requests alternating, so that the machine's drift falls on both
alike; each a miss: a new user (a token minted with the stack's identity key) and a price
range of its own (each holding nearly all of the catalog), which makes a pool key no
request had before, so the edge asks the origin for a pool fill, ranks from it and answers.
Every answer is checked to be a miss (``X-Cache: MISS``), not degraded, of 10 items. One
request at a time (the latency of a miss) after ``WARMUP`` requests not counted.

TLS in this path: the client to the edge and the edge to the origin, each on kept-alive
connections (a handshake per connection, not per request). The baseline is the same path
over plain HTTP in the same run; the ratio is TLS / plain of the p50 and p99 over every
round's requests (the target: the p99 within 1.2x).

    .venv/bin/python -m benchmarks.tls_miss [--requests 400] [--rounds 2] [--out DIR]

``tls_miss.json`` and ``tls_miss.png`` (the latency distributions, CDF) go to ``--out``
(default ``.perso/bench/tls_miss``). Last line: JSON with the p50 and p99 of each, their
ratios and the requests counted.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from benchmarks.report import machine, percentile, quantiles, results_dir, save_and_finish
from config.settings import Settings
from perso import plots
from perso.stack import Stack
from protocol.identity import Claims, issue
from protocol.segments import Segment
from tests.pki import Pki, make_pki

IDENTITY_KEY = "tls-miss-identity-key-0123456789"
REGION = "us-east"
WARMUP = 30
COUNT = 10
# After a stack started: its start-up's background work (the popular list, the first
# pools) done before anything is timed.
SETTLE_S = 3.0
MODES = ("plain", "tls")


@dataclass
class Latencies:
    ms: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in MODES})

    def figures(self, mode: str) -> dict[str, float]:
        samples = self.ms[mode]
        return {
            "p50_ms": round(percentile(samples, 50), 2),
            "p99_ms": round(percentile(samples, 99), 2),
            "mean_ms": round(sum(samples) / len(samples), 2),
        }


def token(user_id: str) -> str:
    now = int(time.time())
    claims = Claims(user_id, Segment.NEW, "premium", "bench-tls", now, now + 3600)
    return issue(claims, IDENTITY_KEY.encode())


def miss_body(user_id: str, n: int) -> dict[str, Any]:
    """A new user's request whose price range no request to its stack had (a pool key of
    its own), each range holding nearly all of the catalog alike."""
    low = n / 1000
    return {
        "user_id": user_id,
        "context": {"page_type": "home", "device": "mobile"},
        "constraints": {"count": COUNT, "price_range": {"min": low, "max": low + 10_000}},
    }


def settings_for(data_dir: Path, certificates: Pki | None) -> Settings:
    tls: dict[str, Any] = {}
    if certificates is not None:
        tls = {
            "tls_cert_file": certificates.cert,
            "tls_key_file": certificates.key,
            "tls_ca_file": certificates.ca,
        }
    return Settings(
        data_dir=data_dir,
        catalog_size=1000,
        workers=0,
        regions=(REGION,),
        identity_keys=SecretStr(IDENTITY_KEY),
        log_level="warning",
        **tls,
    )


class Misses:
    """One stack's edge, asked for misses by one client."""

    def __init__(self, mode: str, edge_url: str, verify: ssl.SSLContext | bool) -> None:
        self.mode = mode
        self.edge_url = edge_url
        self.client = httpx.AsyncClient(timeout=10.0, verify=verify)
        self.sent = 0

    async def miss(self) -> float:
        """One miss through the edge: its latency in ms, the answer checked to be a miss
        ranked at the edge, not degraded, of ``COUNT`` items."""
        n, self.sent = self.sent, self.sent + 1
        user = f"tls-miss-{n}"
        headers = {"authorization": f"Bearer {token(user)}"}
        started = time.perf_counter()
        answer = await self.client.post(
            f"{self.edge_url}/v1/personalize", json=miss_body(user, n), headers=headers
        )
        took = (time.perf_counter() - started) * 1000
        if answer.status_code != 200:
            raise RuntimeError(f"{self.mode}: {answer.status_code}: {answer.text}")
        found = answer.json()
        metadata = found["metadata"]
        clean = not metadata["degraded"] and len(found["items"]) == COUNT
        if answer.headers.get("x-cache") != "MISS" or not clean:
            raise RuntimeError(f"{self.mode}: not a clean miss: {answer.headers} {metadata}")
        return took


async def measure_round(
    round_: int, requests: int, tmp: Path, certificates: Pki, latencies: Latencies
) -> None:
    """Both stacks at once, the requests alternating between them (which goes first
    alternating too), so that whatever else the machine does falls on both alike."""
    plain = Stack(settings_for(tmp / f"plain-{round_}", None), free_ports=True, say=_quiet)
    tls = Stack(settings_for(tmp / f"tls-{round_}", certificates), free_ports=True, say=_quiet)
    async with plain as plain_ends, tls as tls_ends:
        sides = [
            Misses("plain", plain_ends.edges[REGION], True),
            Misses("tls", tls_ends.edges[REGION], certificates.trusted),
        ]
        await asyncio.sleep(SETTLE_S)
        taken: dict[str, list[float]] = {m: [] for m in MODES}
        try:
            for n in range(WARMUP + requests):
                for side in sides if n % 2 == 0 else sides[::-1]:
                    took = await side.miss()
                    if n >= WARMUP:
                        taken[side.mode].append(took)
        finally:
            for side in sides:
                await side.client.aclose()
    for side in sides:
        samples = taken[side.mode]
        latencies.ms[side.mode].extend(samples)
        print(
            f"  round {round_ + 1} {side.mode:<5} {side.edge_url}: p50 "
            f"{percentile(samples, 50):.2f} ms, p99 {percentile(samples, 99):.2f} ms"
        )


def _quiet(_: str) -> None:
    pass


async def run(args: argparse.Namespace) -> None:
    begun = time.perf_counter()
    print(f"machine: {machine()}")
    latencies = Latencies()
    with tempfile.TemporaryDirectory(prefix="tls-miss-") as tmp:
        certificates = make_pki(Path(tmp) / "pki")
        for round_ in range(args.rounds):
            await measure_round(round_, args.requests, Path(tmp), certificates, latencies)
    plain, tls_figures = latencies.figures("plain"), latencies.figures("tls")
    result = {
        "requests_per_mode": len(latencies.ms["plain"]),
        "plain": plain,
        "tls": tls_figures,
        "p50_ratio": round(tls_figures["p50_ms"] / plain["p50_ms"], 3),
        "p99_ratio": round(tls_figures["p99_ms"] / plain["p99_ms"], 3),
        "mean_ratio": round(tls_figures["mean_ms"] / plain["mean_ms"], 3),
        "target_p99_ratio": 1.2,
    }
    print(f"plain HTTP: {plain}")
    print(f"TLS:        {tls_figures}")
    print(
        f"TLS / plain: p50 {result['p50_ratio']}x, p99 {result['p99_ratio']}x "
        f"(target: p99 within 1.2x), mean {result['mean_ratio']}x"
    )
    draw(args.out / "tls_miss.png", latencies)
    save_and_finish(
        result,
        args.out / "tls_miss.json",
        args.out / "tls_miss.png",
        begun,
        {"quantiles_ms": {m: quantiles(latencies.ms[m]) for m in MODES}},
    )


def draw(path: Path, latencies: Latencies) -> None:
    with plots.figure(path, "The edge's miss path: latency over plain HTTP and over TLS") as [ax]:
        for mode in MODES:
            plots.cdf(ax, latencies.ms[mode], mode, log_x=True)
        plots.labelled(ax, "", "latency of a miss through the edge, ms", "share of requests")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="counted per mode and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--out", type=Path, default=results_dir("tls_miss"), help="(.perso/bench/tls_miss)"
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
