"""benchmarks.redis_ops: Redis commands per request of each kind, on a running stack: the
figure a capacity plan multiplies by the request rate (docs/capacity.md).

The stack is ``perso up``'s on one embedded Redis (commands are counted by the server:
``INFO commandstats``), one region of two edge processes sharing a PoP store in that
Redis (as a PoP with several processes runs), one origin, one worker, freshness tiers
off. Each kind of work is done N times while the counters are read before and after; the
commands the idle stack sends meanwhile (sync readers blocking, health checks, upkeep,
figures) are measured over a quiet span of the same length first and taken off. Kinds:

- **edge hit**: a cached answer asked again (the PoP store's entry read, the shared rate
  limit, the decision logged);
- **edge miss**: a request whose key nobody asked before (the fill lease, the origin's
  ranking reads and writes, the entry stored, the decisions logged);
- **feedback**: one click through an edge (the intake's append and the user's
  interactions), and what the worker then does with it (its reads and writes, the sync
  message to the edges, the join's note);
- **decision close**: what the worker does when a served answer's reward window closes.

And the Redis memory of what is kept: bytes per entry of each log (events, decisions,
contexts, rewards), and per user served and clicking once (every key under their tag).

    .venv/bin/python -m benchmarks.redis_ops [--n 300]

Commands are as Redis counts them (``commandstats``): a Lua script's own commands count
beside the script itself (``*_scripts``: how many of the round trips were scripts). Last
line: JSON with commands per request for each kind (``*_commands``; a decision close is
per decision), the Redis server's CPU time for each (``*_redis_cpu_us``: what sizes the
shards), and the commands by name. No baseline: these are counts, not speeds.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from benchmarks.report import finish, machine
from config.settings import Settings
from perso.stack import Stack
from perso.stack_endpoints import Endpoints
from perso.user_tokens import UserTokens
from protocol import keys
from redis_client.client import RedisClient, open_client

DIM = 32
REGION = "bench"
PERSONALIZE = "/v1/personalize"
REWARD_WAIT_S = 30.0


CPU = "cpu_us"  # in a ``commands`` reading: the server's CPU time so far, microseconds


async def commands(redis: RedisClient) -> Counter[str]:
    """Every command the server has run, by name (``INFO commandstats``), and its CPU time
    so far (``INFO cpu``, user and system, as ``CPU``)."""
    stats = await redis.info("commandstats")
    out = Counter({name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()})
    cpu = await redis.info("cpu")
    out[CPU] = round((float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])) * 1e6)
    return out


def body(user: str, page: str = "home") -> dict[str, Any]:
    return {"user_id": user, "context": {"page_type": page, "device": "mobile"}}


class Probe:
    """Counts what ``work`` costs Redis, net of what the idle stack costs in as long."""

    def __init__(self, redis: RedisClient) -> None:
        self._redis = redis

    async def measure(self, work: Any, n: int) -> tuple[Counter[str], int]:
        started = time.monotonic()
        before = await commands(self._redis)
        await work()
        took = time.monotonic() - started
        after = await commands(self._redis)
        busy = after - before
        idle_before = await commands(self._redis)
        await asyncio.sleep(took)
        idle = await commands(self._redis) - idle_before
        idle["info"] += 1  # the probe's own INFO in the busy span
        net = busy - idle
        return Counter({name: count for name, count in net.items() if count > 0}), n


async def run(args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    n = args.n
    with tempfile.TemporaryDirectory(prefix="redis-ops-") as tmp:
        settings = Settings(
            data_dir=Path(tmp),
            catalog_size=2000,
            embedding_dim=DIM,
            text_encoder="hashing",
            workers=1,
            regions=(REGION,),
            freshness_active_s=0,
            freshness_casual_s=0,
            # No join closes while hits, misses and clicks are counted: their windows (and a
            # user's next decision's grace) outlast those phases; then they are counted.
            reward_wait_s=REWARD_WAIT_S,
            reward_grace_s=REWARD_WAIT_S,
            identity_keys=SecretStr("redis-ops-identity-key-0123456789"),
            log_level="warning",
        )
        stack = Stack(
            settings, free_ports=True, say=lambda line: print(f"  {line}"), edges_per_region=2
        )
        async with stack as ends:
            redis = await open_client(ends.redis_url)
            try:
                figures = await count_all(ends, redis, n)
                sizes = await entry_sizes(redis, settings.event_partitions)
                users = await user_bytes(redis, [f"ops-{k}" for k in range(n)])
            finally:
                await redis.aclose()
    report(figures, n, sizes, users)


async def count_all(
    ends: Endpoints, redis: RedisClient, n: int
) -> dict[str, tuple[Counter[str], int]]:
    probe = Probe(redis)
    edge = ends.edges[REGION]
    tokens = UserTokens(ends.origin_url, ends.api_key)
    out: dict[str, tuple[Counter[str], int]] = {}
    async with httpx.AsyncClient(base_url=edge, timeout=10.0) as client:
        users = [f"ops-{k}" for k in range(n)]
        auth = {u: await tokens.headers(client, u) for u in users}
        # New users share their segment's answer: one miss, then hits.
        await client.post(PERSONALIZE, json=body(users[0]), headers=auth[users[0]])
        started = time.monotonic()

        async def hits() -> None:
            for user in users:
                answer = await client.post(PERSONALIZE, json=body(user), headers=auth[user])
                assert answer.headers.get("x-cache") == "HIT", answer.headers

        out["edge_hit"] = await probe.measure(hits, n)

        async def misses() -> None:
            for k, user in enumerate(users):
                # Filters nobody asked for: a key of their own (its variant), one fill.
                request = body(user) | {"constraints": {"price_range": {"min": k / 100}}}
                answer = await client.post(PERSONALIZE, json=request, headers=auth[user])
                assert answer.status_code == 200

        out["edge_miss"] = await probe.measure(misses, n)

        async def clicks() -> None:
            for k, user in enumerate(users):
                item = {"item_id": f"it-{k % 2000:06d}", "action": "click"}
                answer = await client.post(
                    "/v1/feedback", json={"user_id": user, "feedback": [item]}, headers=auth[user]
                )
                assert answer.status_code == 200
            await asyncio.sleep(1.5)  # the worker applies them (real time, 100 ms batches)

        out["feedback"] = await probe.measure(clicks, n)

        async def closes() -> None:
            # Until every window of the 2n slates above is over and its join closed.
            await asyncio.sleep(REWARD_WAIT_S - (time.monotonic() - started) + 5.0)

        out["decision_close"] = await probe.measure(closes, 2 * n)
    return out


LOGS = {
    "events": keys.events_stream,
    "decisions": keys.decisions_stream,
    "contexts": keys.contexts_stream,
    "rewards": keys.rewards_stream,
}


async def entry_sizes(redis: RedisClient, partitions: int) -> dict[str, float]:
    """Bytes of Redis memory per entry of each log (``MEMORY USAGE`` of every partition's
    stream over their entries): what a retention window costs."""
    out: dict[str, float] = {}
    for name, stream in LOGS.items():
        total = entries = 0
        for p in range(partitions):
            entries += int(await redis.xlen(stream(p)))
            total += int(await redis.memory_usage(stream(p), samples=0) or 0)
        if entries:
            out[name] = round(total / entries, 1)
    return out


async def user_bytes(redis: RedisClient, users: list[str]) -> float:
    """Bytes of Redis memory per user who was served and clicked once: every key under
    their hash tag (their record, interactions, context, open decisions...)."""
    total = 0
    for user in users:
        async for name in redis.scan_iter(match=f"u:{{{user}}}:*"):
            total += int(await redis.memory_usage(name, samples=0) or 0)
    return round(total / len(users), 1)


def report(
    figures: dict[str, tuple[Counter[str], int]],
    n: int,
    sizes: dict[str, float],
    users: float,
) -> None:
    out: dict[str, Any] = {"requests_per_kind": n}
    for kind, (counted, per_n) in figures.items():
        cpu_us = counted.pop(CPU, 0)
        total = sum(counted.values())
        scripts = counted["evalsha"] + counted["eval"]
        per = {name: round(c / per_n, 2) for name, c in counted.most_common()}
        print(
            f"{kind}: {total / per_n:.2f} commands each ({scripts / per_n:.2f} scripts), "
            f"{cpu_us / per_n:.0f} µs of Redis CPU: {per}"
        )
        out[f"{kind}_redis_cpu_us"] = round(cpu_us / per_n, 1)
        out[f"{kind}_commands"] = round(total / per_n, 2)
        out[f"{kind}_scripts"] = round(scripts / per_n, 2)
        out[f"{kind}_by_command"] = per
    print(
        f"Redis memory per log entry (bytes): {sizes}; per user served and clicking once: {users}"
    )
    out["bytes_per_entry"] = sizes
    out["bytes_per_user"] = users
    finish(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=300, help="requests of each kind")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
