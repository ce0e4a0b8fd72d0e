"""Simulated browsers under faults, shared by ``benchmarks.faults`` and
``benchmarks.failover``: they ask their region's edge for slates and click one item of one
slate in three, each click with its own ``interaction_id``; a click not acknowledged (503, a
refused connection, a timeout) is sent again, unchanged, after its ``Retry-After``, until
it is. ``verify`` then looks every acknowledged click up in its user's applied-interaction
window (each user clicks fewer than its 50 entries), so "lost" means acknowledged and
never applied, exactly; one found there twice would be double counting. The window holds
every observation applied to the user, a closed join's non-engagements too, so the
benchmarks keep joins open for the whole run (``JOIN_WAIT_S``): only clicks are there.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx
from pydantic import SecretStr

from benchmarks.backlog import drained
from benchmarks.report import percentile
from config.settings import Settings
from origin.learned.user_models import decode_record, observation_hash
from perso.stack_endpoints import Endpoints
from perso.user_tokens import UserTokens
from protocol import keys
from redis_client.client import RedisClient, connect

CLICK_EVERY = 3  # one slate in three gets a click
MAX_CLICKS_PER_USER = 40  # under the worker's 50-interaction window: every one checkable
DRAIN_S = 60.0
# The reward window and grace of the stacks under faults: longer than a run, so no join
# closes while the clicks are counted.
JOIN_WAIT_S = 3600.0

Body = dict[str, Any]


@dataclass
class Click:
    user: str
    region: str
    item_id: str
    interaction_id: str  # the same on every resend: the origin applies it once
    not_before: float = 0.0  # a refusal's Retry-After (monotonic time)

    def body(self) -> Body:
        item = {"item_id": self.item_id, "action": "click", "interaction_id": self.interaction_id}
        return {"user_id": self.user, "feedback": [item]}


@dataclass
class Tally:
    """What the simulated browsers saw."""

    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    phase: str = "warm-up"  # the last process killed
    refused_by_phase: Counter[str] = field(default_factory=Counter)  # feedback 503s
    # feedback the edge held on its disk (202): acknowledged, handed on to the origin later
    held_by_phase: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    latencies_ms: list[tuple[float, float]] = field(default_factory=list)  # (at, ms)
    acked: dict[str, str] = field(default_factory=dict)  # interaction id -> user
    clicks: Counter[str] = field(default_factory=Counter)  # per user, acked or pending
    retries: int = 0

    def count(self, endpoint: str, status: int) -> None:
        self.statuses[(endpoint, status)] += 1
        if endpoint == "feedback" and status == 503:
            self.refused_by_phase[self.phase] += 1
        if endpoint == "feedback" and status == 202:
            self.held_by_phase[self.phase] += 1

    def five_xx(self, endpoint: str | None = None) -> int:
        return sum(
            n
            for (where, status), n in self.statuses.items()
            if status >= 500 and (endpoint is None or where == endpoint)
        )


class Browsers:
    """``concurrency`` browsers, each a loop: a slate, now and then a click, a pause."""

    def __init__(self, ends: Endpoints, users: int, tally: Tally, seed: int) -> None:
        self._ends = ends
        regions = list(ends.edges)
        self._users = [(f"fault-{n}", regions[n % len(regions)]) for n in range(users)]
        self._tally = tally
        self._rng = random.Random(seed)
        self._tokens = UserTokens(ends.origin_url, ends.api_key)
        self._unacked: list[Click] = []
        self._started = time.monotonic()

    async def tokens(self, client: httpx.AsyncClient) -> None:
        for user, _ in self._users:
            await self._tokens.token(client, user)

    async def run(self, client: httpx.AsyncClient, stop: asyncio.Event) -> None:
        while not stop.is_set():
            due = self._due()
            if due is not None and self._rng.random() < 0.5:
                self._tally.retries += 1
                await self._click(client, due)
            else:
                await self._visit(client)
            await asyncio.sleep(self._rng.uniform(0.005, 0.02))

    async def flush(self, client: httpx.AsyncClient, deadline: float) -> None:
        """Send the clicks still unacknowledged until each is (or the deadline passes)."""
        while self._unacked and time.monotonic() < deadline:
            due = self._due()
            if due is not None:
                self._tally.retries += 1
                await self._click(client, due)
            await asyncio.sleep(0.02)

    def _due(self) -> Click | None:
        """The first click waiting for a resend whose Retry-After is over."""
        now = time.monotonic()
        for n, click in enumerate(self._unacked):
            if click.not_before <= now:
                return self._unacked.pop(n)
        return None

    async def _visit(self, client: httpx.AsyncClient) -> None:
        user, region = self._rng.choice(self._users)
        body: Body = {"user_id": user, "context": {"page_type": "home", "device": "mobile"}}
        answer = await self._post(client, user, region, "personalize", body)
        if answer is None or answer.status_code != 200:
            return
        items = answer.json()["items"]
        clicks = self._tally.clicks
        if items and self._rng.randrange(CLICK_EVERY) == 0 and clicks[user] < MAX_CLICKS_PER_USER:
            clicks[user] += 1
            item = str(self._rng.choice(items)["item_id"])
            await self._click(client, Click(user, region, item, f"{user}:{clicks[user]}"))

    async def _click(self, client: httpx.AsyncClient, click: Click) -> None:
        """Send ``click``; keep it for a resend unless it was acknowledged (or refused
        for good, a 4xx other than 429)."""
        answer = await self._post(client, click.user, click.region, "feedback", click.body())
        # 202: held on the edge's disk, handed on when the origin can take it (acknowledged).
        if answer is not None and answer.status_code in (200, 202):
            self._tally.acked[click.interaction_id] = click.user
        elif answer is None or answer.status_code == 429 or answer.status_code >= 500:
            # As a well-behaved client: again after Retry-After (no answer: after a second).
            wait = answer.headers.get("retry-after", "1") if answer is not None else "1"
            click.not_before = time.monotonic() + (float(wait) if wait.isdigit() else 1.0)
            self._unacked.append(click)

    async def _post(
        self,
        client: httpx.AsyncClient,
        user: str,
        region: str,
        endpoint: str,
        body: Body,
    ) -> httpx.Response | None:
        started = time.monotonic()
        try:
            headers = await self._tokens.headers(client, user)
            answer = await self._to_pop(client, region, f"/v1/{endpoint}", body, headers)
        except httpx.HTTPError as exc:
            self._tally.errors[f"{endpoint} {type(exc).__name__}"] += 1
            return None
        ms = (time.monotonic() - started) * 1000
        self._tally.latencies_ms.append((started - self._started, ms))
        self._tally.count(endpoint, answer.status_code)
        return answer

    async def _to_pop(
        self,
        client: httpx.AsyncClient,
        region: str,
        path: str,
        body: Body,
        headers: dict[str, str],
    ) -> httpx.Response:
        """The request to one of the region's edge processes, as a PoP's load balancer
        sends it: a process at random, the next one when a process refuses the connection
        (the request never reached it, so sending it elsewhere is safe)."""
        urls = self._ends.edge_urls.get(region) or [self._ends.edges[region]]
        first = self._rng.randrange(len(urls))
        for n in range(len(urls)):
            try:
                return await client.post(
                    f"{urls[(first + n) % len(urls)]}{path}", json=body, headers=headers
                )
            except httpx.ConnectError:
                if n == len(urls) - 1:
                    raise
        raise AssertionError("unreachable: a PoP has at least one process")


async def ready(url: str | None, redis_url: str) -> bool:
    async with httpx.AsyncClient(timeout=1.0) as client:
        try:
            if url is None:
                redis = connect(redis_url, socket_timeout=1.0)
                try:
                    return bool(await redis.ping())
                finally:
                    await redis.aclose()
            return (await client.get(f"{url}/readyz")).status_code == 200
        except Exception:
            return False


def held_at_edges(data_dir: Path) -> int:
    """Feedback requests the stack's edges hold on disk, not yet handed on (every region's
    and process's directory of the default spool: ``edge.origins.feedback_spool``)."""
    return sum(1 for _ in (data_dir / "edge-feedback").glob("*/p-*/*.json"))


async def verify(
    redis: RedisClient, tally: Tally, partitions: int, dim: int, *, data_dir: Path
) -> dict[str, int]:
    """Acknowledged clicks applied, lost and applied twice, from the users' states, once
    the edges handed on what they held and the workers drained the streams."""
    deadline = time.monotonic() + DRAIN_S
    while held_at_edges(data_dir) and time.monotonic() < deadline:  # noqa: ASYNC110 - polling other processes
        await asyncio.sleep(0.5)
    streams = keys.events_streams(partitions)
    while not await drained(redis, streams) and time.monotonic() < deadline:  # noqa: ASYNC110 - polling another process
        await asyncio.sleep(0.5)
    users = sorted(tally.clicks)
    states = cast(list[bytes | None], await get_all(redis, [keys.user_record(u) for u in users]))
    windows = {u: decode_record(raw, dim).window for u, raw in zip(users, states, strict=True)}
    applied = sum(1 for i, u in tally.acked.items() if observation_hash(i) in windows[u])
    # Each user's window holds every observation applied to them (fewer than its length
    # each): one there twice was applied twice.
    twice = sum(len(w) - len(set(w)) for w in windows.values())
    counts = await get_all(redis, [keys.events_accepted(p) for p in range(partitions)])
    accepted = sum(int(n) for n in counts if n is not None)
    return {
        "held_left": held_at_edges(data_dir),
        "acked": len(tally.acked),
        "applied": applied,
        "lost": len(tally.acked) - applied,
        # Appended to the streams: acked, and accepted by the origin whose answer the
        # client never got (an edge killed while answering).
        "accepted": accepted,
        "duplicates": twice,
    }


def phase_p99(tally: Tally, marks: list[tuple[str, float]]) -> dict[str, float]:
    """p99 of the answers that started in each phase (from one kill to the next)."""
    out: dict[str, float] = {}
    bounds = [*marks, ("end", float("inf"))]
    for (name, start), (_, end) in itertools.pairwise(bounds):
        samples = [ms for at, ms in tally.latencies_ms if start <= at < end]
        out[name] = round(percentile(samples, 99), 1) if samples else float("nan")
    return out


async def get_all(redis: RedisClient, names: list[str]) -> list[Any]:
    """GET of every key, one pipeline (a cluster splits it by node; MGET could not)."""
    async with redis.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.get(name)
        return list(await pipe.execute())


def stack_settings(data_dir: Path, regions: tuple[str, ...], dim: int, name: str) -> Settings:
    """The fault benchmarks' stack (``benchmarks.faults``, ``benchmarks.failover``): 2,000
    items with hashed titles, two workers, freshness tiers off, no join closing during the
    run (a close's non-engagements would take places in the users' windows of applied
    observations, which ``verify`` reads)."""
    return Settings(
        data_dir=data_dir,
        catalog_size=2000,
        embedding_dim=dim,
        text_encoder="hashing",
        workers=2,
        regions=regions,
        freshness_active_s=0,
        freshness_casual_s=0,
        worker_claim_idle_ms=2000,
        reward_wait_s=JOIN_WAIT_S,
        reward_grace_s=JOIN_WAIT_S,
        identity_keys=SecretStr(f"{name}-identity-key-0123456789"),
        log_level="warning",
    )
