"""``benchmarks.hit_ratio``'s short mode against real processes: the same traffic schedule
(``benchmarks.traffic_model``) sent in real time to a real stack (``perso.stack.Stack``: an
embedded Redis, the catalog, the origin, its stream workers and one edge, all at the
shipped settings) over HTTP, so that pool fills, users' states, model updates and their
sync messages take their real paths and their real latency.

One region (the schedule's users of that region; one edge serves them). What the simulated
replay (``benchmarks.edge_replay``) feeds its edges, this sends to the processes:

- **History**: the known users' interactions of the two days before the replay, sent to
  the edge's ``/v1/feedback`` with their times (``feedback[].timestamp``), one request per
  user (with a token the benchmark signs for it, premium tier), before the replay starts:
  the edge knows the users whose feedback passed through it and when they interacted (as
  the simulated edges do), the origin records them, the stream workers update the users'
  models and the sync stream brings each user's model to the edge, as to an edge that has
  been running for those two days.
- **Tokens** from the origin's ``/v1/auth/token`` (with the stack's API key) at a user's
  first request, at the first request of each later visit (no request for
  ``session_idle_s``) and when the one held has expired, as the replay's browsers do: the
  token's segment is the origin's record of the user then.
- **Page views** as ``POST /v1/personalize`` to the edge with the user's token, each at its
  time in the schedule (the warm-up, then the measured window); **interactions** as
  ``POST /v1/feedback`` to the edge with the user's token (a click on the item the
  schedule names: rank ``n`` of the Zipf popularity is the catalog's ``n``-th item).

A request is a hit when the edge answers it with ``X-Cache: HIT`` (no origin call on its
path: an answer ranked at the edge from a held pool and the user's held state, or the
origin's ranking from the edge's cache); origin calls are the edge's own counters over the
measured window (``perso_edge_fills``: misses, refreshes and pre-warms;
``perso_edge_pool_fills``; ``perso_edge_user_fetches``), per request of the window.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from benchmarks.backlog import wait_settled
from benchmarks.edge_replay import Tally, token_due
from benchmarks.traffic_model import CATALOG_ITEMS, INTERACTION, Event
from config.settings import Settings
from loadtests.traffic import SimUser, Traffic
from origin.catalog.sample import item_id_of
from perso import plots
from perso.stack import Stack
from perso.stack_endpoints import Endpoints
from protocol.api import MAX_FEEDBACK_ITEMS
from protocol.identity import Claims, issue
from protocol.segments import Segment
from protocol.tiers import Tier
from redis_client.client import connect

# The edge's counters that count origin calls, by the replay's kinds of call.
ORIGIN_COUNTERS = {
    "perso_edge_fills_total": "fill",
    "perso_edge_pool_fills_total": "pool fill",
    "perso_edge_user_fetches_total": "user state",
}
# The edge's calls for the rows of users' own candidates (edge.ranking.own_candidates).
OWN_ROWS_COUNTER = "perso_edge_own_candidates_total"
OWN_ROWS = "own candidates' rows"
# and the rows they brought
OWN_ROWS_SENT = "own candidates' rows sent"
# How long the workers may take to apply the history, at most.
HISTORY_WAIT_S = 120.0
# Requests in flight at once, at most (the schedule sends a few a second).
CONCURRENCY = 64
TIMEOUT_S = 10.0


def history_of(events: Sequence[Event], warmup_s: float) -> dict[int, list[tuple[float, int]]]:
    """Each user's interactions (time, item rank) before the replay starts (``warmup_s``
    before the window), by user index: what the origin is told first."""
    out: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for t, kind, user, item in events:
        if kind == INTERACTION and t < -warmup_s:
            out[user].append((t, item))
    return dict(out)


def feedback_bodies(
    user_id: str, interactions: Sequence[tuple[float, int]], at_s: Callable[[float], float]
) -> list[dict[str, object]]:
    """The origin's ``/v1/feedback`` bodies for a user's past interactions, at most
    ``MAX_FEEDBACK_ITEMS`` a request, each click at its wall time ``at_s(t)``."""
    clicks = [
        {
            "item_id": item_id_of(rank - 1, CATALOG_ITEMS),
            "action": "click",
            "timestamp": datetime.fromtimestamp(at_s(t), UTC).isoformat(),
        }
        for t, rank in interactions
    ]
    return [
        {"user_id": user_id, "feedback": clicks[k : k + MAX_FEEDBACK_ITEMS]}
        for k in range(0, len(clicks), MAX_FEEDBACK_ITEMS)
    ]


@dataclass
class Browsers:
    """The tokens the users' browsers hold, asked of the origin as the replay's do."""

    origin: httpx.AsyncClient
    api_key: str
    ttl_s: float
    idle_s: float
    held: dict[str, tuple[str, float]] = field(default_factory=dict)  # user -> token, expiry
    last: dict[str, float] = field(default_factory=dict)
    issued: int = 0

    async def token(self, user_id: str, now: float) -> str:
        held, last = self.held.get(user_id), self.last.get(user_id)
        self.last[user_id] = now
        if held is None or token_due(held[1], last, now, self.idle_s):
            reply = await self.origin.post(
                "/v1/auth/token", json={"user_id": user_id}, headers={"x-api-key": self.api_key}
            )
            reply.raise_for_status()
            held = (reply.json()["token"], now + self.ttl_s)
            self.held[user_id] = held
            self.issued += 1
        return held[0]


@dataclass
class LiveRun:
    tally: Tally
    region: str
    history_clicks: int
    failures: Counter[str]
    tokens_issued: int
    wall_s: float


async def counters(client: httpx.AsyncClient) -> Counter[str]:
    """The edge's origin-call counters, from its ``/metrics``; and its calls for the rows
    of users' own candidates (``OWN_ROWS``: off the requests' path, which the simulation
    does not model, so reported apart)."""
    reply = await client.get("/metrics")
    out: Counter[str] = Counter()
    for line in reply.text.splitlines():
        name = line.partition("{")[0].partition(" ")[0]
        if name in ORIGIN_COUNTERS:
            out[ORIGIN_COUNTERS[name]] += int(float(line.rsplit(" ", 1)[1]))
        elif name == OWN_ROWS_COUNTER and 'what="fetch"' in line:
            out[OWN_ROWS] += int(float(line.rsplit(" ", 1)[1]))
        elif name == OWN_ROWS_COUNTER and 'what="fetched"' in line:
            out[OWN_ROWS_SENT] += int(float(line.rsplit(" ", 1)[1]))
    return out


class Live:
    def __init__(
        self, ends: Endpoints, settings: Settings, users: Sequence[SimUser], seed: int
    ) -> None:
        self.users = users
        self.region = settings.region
        self.rng = random.Random(seed)
        self.origin = httpx.AsyncClient(
            base_url=ends.origin_url,
            headers={"authorization": f"Bearer {ends.origin_token}"},
            timeout=TIMEOUT_S,
        )
        self.edge = httpx.AsyncClient(base_url=ends.edges[self.region], timeout=TIMEOUT_S)
        self.browsers = Browsers(
            self.origin, ends.api_key, settings.token_ttl_s, settings.session_idle_s
        )
        self.tally = Tally()
        self.failures: Counter[str] = Counter()
        self.slots = asyncio.Semaphore(CONCURRENCY)

    async def aclose(self) -> None:
        await self.origin.aclose()
        await self.edge.aclose()

    async def tell_history(
        self, history: dict[int, list[tuple[float, int]]], start: float, key: bytes
    ) -> int:
        """Send every user's history through the edge, ``t`` 0 of the schedule at wall time
        ``start``, each user with a token signed with ``key``; the clicks sent."""
        bodies = [
            body
            for index, interactions in history.items()
            for body in feedback_bodies(
                self.users[index].user_id, interactions, lambda t: start + t
            )
        ]

        async def send(body: dict[str, object]) -> None:
            now = int(time.time())
            claims = Claims(
                str(body["user_id"]), Segment.NEW, Tier.PREMIUM.value, "history", now, now + 3600
            )
            auth = {"authorization": f"Bearer {issue(claims, key)}"}
            async with self.slots:
                reply = await self.edge.post("/v1/feedback", json=body, headers=auth)
                if reply.status_code != 200:
                    self.failures[f"history {reply.status_code}"] += 1

        await asyncio.gather(*(send(b) for b in bodies))
        return sum(len(v) for v in history.values())

    async def page_view(self, user: SimUser, now: float, counted: bool, at_s: float) -> None:
        body = Traffic.personalize_body(user, self.rng)
        reply = await self._send("personalize", user.user_id, body, now)
        if reply is not None and counted:
            hit = reply.headers.get("x-cache") == "HIT"
            labels = ("all", f"class:{user.activity}", f"region:{user.region}")
            self.tally.count(labels, hit, at_s)

    async def interaction(self, user: SimUser, rank: int, now: float) -> None:
        click = {"item_id": item_id_of(rank - 1, CATALOG_ITEMS), "action": "click"}
        await self._send(
            "feedback", user.user_id, {"user_id": user.user_id, "feedback": [click]}, now
        )

    async def _send(
        self, route: str, user_id: str, body: dict[str, Any], now: float
    ) -> httpx.Response | None:
        """``body`` to the edge's ``/v1/{route}`` with the user's token; the answer, or None
        when it failed (counted)."""
        async with self.slots:
            try:
                token = await self.browsers.token(user_id, now)
                reply = await self.edge.post(
                    f"/v1/{route}", json=body, headers={"authorization": f"Bearer {token}"}
                )
            except httpx.HTTPError as exc:
                self.failures[type(exc).__name__] += 1
                return None
        if reply.status_code != 200:
            self.failures[f"{route} {reply.status_code}"] += 1
            return None
        return reply

    async def replay(self, events: Sequence[Event], start: float) -> None:
        """Every event from the warm-up on at its time, ``t`` 0 at wall time ``start``; the
        edge's origin calls over the window (``t`` from 0) counted."""
        tasks: set[asyncio.Task[None]] = set()
        before: Counter[str] | None = None
        for t, kind, index, item in events:
            wait = start + t - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if t >= 0 and before is None:
                before = await counters(self.edge)
            user, now = self.users[index], time.time()
            job = (
                self.interaction(user, item, now)
                if kind == INTERACTION
                else self.page_view(user, now, counted=t >= 0, at_s=max(t, 0.0))
            )
            task = asyncio.create_task(job)
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
        after = await counters(self.edge)
        after.subtract(before or Counter())
        self.tally.events.update(+after)


async def run_live(
    users: Sequence[SimUser],
    events: Sequence[Event],
    *,
    region: str,
    warmup_s: float,
    seed: int,
    say: Callable[[str], None] = print,
) -> LiveRun:
    """``events``, the traffic of ``region``'s users alone (as ``compare`` picks them),
    through a real stack (see the module)."""
    started = time.perf_counter()
    history = history_of(events, warmup_s)
    replayed = [e for e in events if e[0] >= -warmup_s]
    with tempfile.TemporaryDirectory(prefix="hit-ratio-live-") as tmp:
        settings = Settings(
            data_dir=Path(tmp) / "stack",
            catalog_size=CATALOG_ITEMS,
            text_encoder="hashing",
            regions=(region,),
            region=region,
            identity_keys=SecretStr("hit-ratio-live-" + "k" * 32),
            log_level="warning",
        )
        stack = Stack(settings, free_ports=True, redis_persistent=False, say=say)
        ends = await stack.start()
        live = Live(ends, settings, users, seed)
        try:
            # The history's times are as if the replay (``-warmup_s``) started now; it
            # starts once the workers have applied them, ``late`` seconds later (a shift of
            # the history by as much, against the day that sets a segment).
            told_at = time.time()
            clicks = await live.tell_history(
                history, told_at + warmup_s, settings.identity_key_list[0]
            )
            redis = connect(ends.redis_url)
            try:  # the workers have applied it (bounded: the replay starts anyway)
                await wait_settled(redis, settings.event_partitions, HISTORY_WAIT_S)
            finally:
                await redis.aclose()
            late = time.time() - told_at
            say(
                f"history: {clicks:,} clicks of {len(history):,} users told the edge and "
                f"applied in {late:.0f} s; replaying {len(replayed):,} events in real time"
            )
            await live.replay(replayed, time.time() + warmup_s)
        finally:
            with contextlib.suppress(Exception):
                await live.aclose()
            await stack.stop()
    return LiveRun(
        live.tally,
        region,
        clicks,
        live.failures,
        live.browsers.issued,
        time.perf_counter() - started,
    )


# The short mode's defaults: a warm-up long enough for the pools and the users' first
# requests, a window of a few minutes, one region.
WARMUP_S = 120.0
MINUTES = 5.0
# The real stack within this many points of the simulation, overall and for power users.
TARGET_POINTS = 2.0


@dataclass(frozen=True)
class Compared:
    simulated: Tally
    live: LiveRun
    users: int  # the region's


def points(live: float | None, simulated: float | None) -> float | None:
    """The real stack's hit ratio minus the simulation's, in points."""
    return None if live is None or simulated is None else round(100 * (live - simulated), 2)


async def compare(
    users: Sequence[SimUser],
    events: Sequence[Event],
    *,
    region: str,
    warmup_s: float,
    seed: int,
    simulate: Callable[[Sequence[Event]], Awaitable[Tally]],
) -> Compared:
    """The region's traffic simulated (``simulate``, the replay at the shipped settings),
    then sent to a real stack."""
    mine = [e for e in events if users[e[2]].region == region]
    simulated = await simulate(mine)
    live = await run_live(users, mine, region=region, warmup_s=warmup_s, seed=seed)
    return Compared(simulated, live, len({e[2] for e in mine}))


def plot(path: Path, compared: Compared) -> None:
    """Overall and per class: the simulation beside the real stack."""
    labels = ["all"] + [
        c
        for c in ("power", "active", "casual", "new")
        if compared.live.tally.requests[f"class:{c}"]
    ]
    keys = ["all" if c == "all" else f"class:{c}" for c in labels]
    with plots.figure(
        path, "Edge hit ratio, short window: simulated origin against a real stack"
    ) as (ax,):
        width = 0.38
        for k, (name, tally) in enumerate(
            (("simulated", compared.simulated), ("real stack", compared.live.tally))
        ):
            ax.bar(
                [i + (k - 0.5) * width for i in range(len(keys))],
                [100 * (tally.ratio(key) or 0.0) for key in keys],
                width,
                label=name,
                color=f"C{k}",
            )
        ax.set_xticks(range(len(keys)), labels)
        ax.set_ylim(0, 110)
        ax.legend(loc="lower right")
        plots.labelled(ax, f"region {compared.live.region}", "user class", "hit ratio (%)")
