"""Rate limits and fills shared by the edge processes of one PoP, against per-process ones.

A real stack (embedded Redis, a 1,000-item catalog, the origin) with one region run as a
PoP of three edge processes sharing a store in the stack's Redis (``perso up
--edges-per-region 3``), and in the same run three more edge processes of the region
with their own in-process stores, the baseline: what every edge was before, per-process
limits and per-process coalescing.

- **Limits**: one free-tier user (10 personalize requests a second, 10 at once) sends
  ``--rate`` requests a second for ``--seconds``, round-robin over the three processes,
  to a key already filled (every allowed request is a hit; a refused one gets the cached
  answer with ``metadata.rate_limited``). The allowed rate is counted after the first
  ``WARMUP_S`` (the burst), by the time each request was sent.
- **Fills**: a cold key asked by ``--burst`` new users at once, spread over the three
  processes; the origin fills per key are the processes' ``perso_edge_fills_total``
  summed, before and after. ``--rounds`` keys per mode.

Run: ``.venv/bin/python -m benchmarks.rate_limits [--rate 50] [--seconds 20]``
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from pydantic import SecretStr

from benchmarks.report import finish, machine, percentile
from config.settings import Settings
from perso.stack import Stack
from protocol.identity import Claims, issue
from protocol.segments import Segment
from protocol.tiers import LIMITS, PERSONALIZE, Tier

REGION = "us-east"
PROCESSES = 3
# Seconds at the start of a limits run that are not counted: the burst's.
WARMUP_S = 2.0
COUNTRIES = ("CA", "BR", "GB", "DE", "SE", "AE", "IN", "JP", "AU")
DEVICES = ("mobile", "desktop", "tablet", "tv")
FREE = LIMITS[Tier.FREE][PERSONALIZE]
# The key of the limits runs: the last, never one of the cold keys (the first ones).
KEYS = len(COUNTRIES) * len(DEVICES)
HOT_KEY = KEYS - 1


def indent(line: str) -> None:
    print(f"  {line}", flush=True)


class Tokens:
    """User tokens as the origin issues them, signed here with the stack's identity key."""

    def __init__(self, key: str) -> None:
        self._key = key.encode()

    def headers(self, user_id: str, tier: Tier) -> dict[str, str]:
        now = int(time.time())
        claims = Claims(user_id, Segment.NEW, tier.value, f"bench-{tier.value}", now, now + 3600)
        return {"authorization": f"Bearer {issue(claims, self._key)}"}


def body(user_id: str, key: int) -> dict[str, object]:
    """A new user's request for the cold key numbered ``key`` (its geo and device)."""
    context = {
        "page_type": "home",
        "device": DEVICES[key // len(COUNTRIES) % len(DEVICES)],
        "geo": {"country": COUNTRIES[key % len(COUNTRIES)]},
    }
    return {"user_id": user_id, "context": context, "constraints": {"count": 10}}


@dataclass
class Limited:
    allowed: int  # requests let through in the steady window
    window_s: float
    sent: int
    first_second: int  # let through in the first second (the burst)
    p50_ms: float
    p99_ms: float

    @property
    def allowed_rps(self) -> float:
        return self.allowed / self.window_s


async def limits_run(
    client: httpx.AsyncClient,
    edges: list[str],
    *,
    tokens: Tokens,
    user: str,
    rate: float,
    seconds: float,
) -> Limited:
    """``user`` (free tier) asks ``rate`` times a second for ``seconds``, round-robin over
    ``edges``, for a key each edge already holds."""
    for n, edge in enumerate(edges):  # fill the key at each edge (the PoP's: once)
        warm = f"{user}-warm-{n}"
        response = await client.post(
            f"{edge}/v1/personalize",
            json=body(warm, HOT_KEY),
            headers=tokens.headers(warm, Tier.PREMIUM),
        )
        response.raise_for_status()
    headers = tokens.headers(user, Tier.FREE)
    sent: list[tuple[float, bool]] = []
    latencies: list[float] = []

    async def one(edge: str, offset: float) -> None:
        started = time.perf_counter()
        response = await client.post(
            f"{edge}/v1/personalize", json=body(user, HOT_KEY), headers=headers
        )
        latencies.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
        sent.append((offset, not response.json()["metadata"].get("rate_limited", False)))

    tasks = []
    t0 = time.perf_counter()
    for n in range(int(rate * seconds)):
        offset = n / rate
        await asyncio.sleep(max(0.0, t0 + offset - time.perf_counter()))
        tasks.append(asyncio.create_task(one(edges[n % len(edges)], offset)))
    await asyncio.gather(*tasks)
    steady = [allowed for offset, allowed in sent if offset >= WARMUP_S]
    return Limited(
        allowed=sum(steady),
        window_s=seconds - WARMUP_S,
        sent=len(sent),
        first_second=sum(allowed for offset, allowed in sent if offset < 1.0),
        p50_ms=percentile(latencies, 50),
        p99_ms=percentile(latencies, 99),
    )


async def metric(client: httpx.AsyncClient, edges: list[str], sample: str) -> int:
    """The sum over ``edges`` of the ``/metrics`` sample that starts with ``sample``."""
    total = 0
    for edge in edges:
        text = (await client.get(f"{edge}/metrics")).text
        line = next(x for x in text.splitlines() if x.startswith(sample))
        total += int(float(line.rsplit(" ", 1)[1]))
    return total


async def fills(client: httpx.AsyncClient, edges: list[str]) -> int:
    """Entries the origin filled for ``edges`` so far."""
    return await metric(client, edges, "perso_edge_fills_total")


@dataclass
class Cold:
    fills_per_key: list[int]
    p50_ms: float
    p99_ms: float


async def cold_keys(
    client: httpx.AsyncClient, edges: list[str], tokens: Tokens, keys: range, burst: int
) -> Cold:
    """For each key of ``keys``, ``burst`` new users ask it at once, spread over ``edges``."""
    per_key: list[int] = []
    latencies: list[float] = []
    for key in keys:
        users = [f"cold-{key}-{n}" for n in range(burst)]
        before = await fills(client, edges)

        async def one(n: int, user: str, key: int) -> None:
            headers = tokens.headers(user, Tier.PREMIUM)
            started = time.perf_counter()
            response = await client.post(
                f"{edges[n % len(edges)]}/v1/personalize",
                json=body(user, key),
                headers=headers,
            )
            latencies.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()

        await asyncio.gather(*(one(n, user, key) for n, user in enumerate(users)))
        per_key.append(await fills(client, edges) - before)
    return Cold(per_key, percentile(latencies, 50), percentile(latencies, 99))


async def run(rate: float, seconds: float, burst: int, rounds: int) -> None:
    print(f"machine: {machine()}")
    key = secrets.token_urlsafe(32)
    tokens = Tokens(key)
    with tempfile.TemporaryDirectory(prefix="rate-limits-") as tmp:
        settings = Settings(
            data_dir=Path(tmp),
            catalog_size=1000,
            embedding_dim=32,
            text_encoder="hashing",
            workers=0,
            regions=(REGION,),
            region=REGION,
            identity_keys=SecretStr(key),
            log_level="warning",
        )
        print(f"stack: Redis, catalog, origin; region {REGION} as a PoP of {PROCESSES} edges")
        stack = Stack(
            settings,
            free_ports=True,
            redis_persistent=False,
            say=indent,
            edges_per_region=PROCESSES,
        )
        async with stack as endpoints:
            pop = endpoints.edge_urls[REGION]
            print(f"baseline: {PROCESSES} more edges of {REGION}, each with its own store")
            own = [
                await stack.add_edge(REGION, env={"PERSO_EDGE_STORE": "memory"})
                for _ in range(PROCESSES)
            ]
            limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
            async with httpx.AsyncClient(timeout=10.0, limits=limits) as client:
                print(
                    f"\none free-tier user ({FREE.per_user_rps:.0f}/s, {FREE.per_user_rps:.0f} at "
                    f"once) sending {rate:.0f}/s for {seconds:.0f} s over {PROCESSES} processes:"
                )
                shared = await limits_run(
                    client, pop, tokens=tokens, user="rl-shared", rate=rate, seconds=seconds
                )
                local = await limits_run(
                    client, own, tokens=tokens, user="rl-local", rate=rate, seconds=seconds
                )
                print(
                    f"\na cold key asked by {burst} new users at once over {PROCESSES} processes:"
                )
                cold_shared = await cold_keys(client, pop, tokens, range(rounds), burst)
                cold_local = await cold_keys(client, own, tokens, range(rounds, 2 * rounds), burst)
                checks = "perso_edge_rate_limit_checks_total{decided_by="
                decided = {
                    by: await metric(client, pop, f'{checks}"{by}"') for by in ("pop", "process")
                }
                outcomes = {
                    outcome: await metric(
                        client, pop, f'perso_edge_pop_fills_total{{outcome="{outcome}"'
                    )
                    for outcome in ("led", "found", "followed", "waited_out", "unreachable")
                }
    print(f"the PoP's rate-limit checks by what decided them: {decided}")
    print(f"the PoP's fill leases: {outcomes}")
    report(
        decided=decided,
        outcomes=outcomes,
        rate=rate,
        seconds=seconds,
        burst=burst,
        shared=shared,
        local=local,
        cold_shared=cold_shared,
        cold_local=cold_local,
    )


def report(
    *,
    decided: dict[str, int],
    outcomes: dict[str, int],
    rate: float,
    seconds: float,
    burst: int,
    shared: Limited,
    local: Limited,
    cold_shared: Cold,
    cold_local: Cold,
) -> None:
    limit = FREE.per_user_rps
    print("                        allowed/s  ratio to limit  first second  p50 ms  p99 ms")
    for name, fig in (("PoP store (shared)", shared), ("per process", local)):
        print(
            f"  {name:<20} {fig.allowed_rps:>10.2f} {fig.allowed_rps / limit:>15.2f}"
            f" {fig.first_second:>13} {fig.p50_ms:>7.1f} {fig.p99_ms:>7.1f}"
        )
    print("                        fills/key (mean)  max  p50 ms  p99 ms")
    for name, cold in (("PoP store (shared)", cold_shared), ("per process", cold_local)):
        mean = sum(cold.fills_per_key) / len(cold.fills_per_key)
        print(
            f"  {name:<20} {mean:>17.2f} {max(cold.fills_per_key):>4}"
            f" {cold.p50_ms:>7.1f} {cold.p99_ms:>7.1f}"
        )
    shared_fills = sum(cold_shared.fills_per_key) / len(cold_shared.fills_per_key)
    local_fills = sum(cold_local.fills_per_key) / len(cold_local.fills_per_key)
    finish(
        {
            "processes": PROCESSES,
            "offered_rps": rate,
            "seconds": seconds,
            "limit_rps": limit,
            "allowed_rps": round(shared.allowed_rps, 3),
            "ratio_to_limit": round(shared.allowed_rps / limit, 3),
            "first_second_allowed": shared.first_second,
            "per_process_allowed_rps": round(local.allowed_rps, 3),
            "per_process_ratio_to_limit": round(local.allowed_rps / limit, 3),
            "per_process_first_second_allowed": local.first_second,
            "ratio_vs_per_process": round(shared.allowed_rps / local.allowed_rps, 3),
            "p50_ms": round(shared.p50_ms, 2),
            "per_process_p50_ms": round(local.p50_ms, 2),
            "burst": burst,
            "cold_keys": len(cold_shared.fills_per_key),
            "fills_per_cold_key": round(shared_fills, 3),
            "max_fills_per_cold_key": max(cold_shared.fills_per_key),
            "per_process_fills_per_cold_key": round(local_fills, 3),
            "fills_ratio_vs_per_process": round(shared_fills / local_fills, 3),
            "checks_decided_by_process": decided["process"],
            "fill_leases": outcomes,
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=50.0, help="requests/s sent (50)")
    parser.add_argument("--seconds", type=float, default=20.0, help="per mode (20)")
    parser.add_argument("--burst", type=int, default=30, help="users per cold key (30)")
    parser.add_argument("--rounds", type=int, default=8, help="cold keys per mode (8)")
    args = parser.parse_args()
    most = (KEYS - 1) // 2
    if args.seconds <= WARMUP_S or not 1 <= args.rounds <= most:
        parser.error(f"--seconds must exceed {WARMUP_S}, --rounds be within 1-{most}")
    asyncio.run(run(args.rate, args.seconds, args.burst, args.rounds))


if __name__ == "__main__":
    main()
