"""``perso demo``: the stack under simulated browser traffic for a bounded time, then a report.

Virtual browsers (closed loop, no think time) pick users from the traffic model, ask their
region's edge for a personalized feed, and sometimes act on an item. Latency is measured
by the client (what a browser would see, including this machine's own load) and reported
by the edge (``metadata.latency_ms``). After the traffic stops, the demo waits for the
stream workers to catch up and reads the outcome from Redis.
"""

from __future__ import annotations

import asyncio
import math
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from config.settings import ConfigError, Settings
from loadtests.traffic import SimUser, Traffic, make_population
from origin.learned.user_models import decode_record
from origin.offline.report import text
from perso.console import table
from perso.demo_freshness import Scrape, poll
from perso.demo_series import Observation, bucket_width
from perso.evaluate import evaluate_window
from perso.stack import Stack
from perso.stack_endpoints import Endpoints
from perso.user_tokens import UserTokens
from protocol import keys
from redis_client.client import RedisClient, connect

# ``perso demo --evaluate``: candidates a shop might weigh against the live policy, the
# reward window that closes the demo's joins in seconds, and how many decisions to estimate
# them on (the newest).
DEMO_CANDIDATES = (
    "explore-low:exploration_weight=0.03",
    "explore-high:exploration_weight=0.3",
    "diverse:diversity_weight=0.3",
    "random",
    "popular",
)
DEMO_REWARD_WAIT_S = 5.0
JOIN_SLACK_S = 3.0
EVALUATED = 2_000

# Sources of items ranked from the user's own model or session (the recommendation sources).
_PERSONAL_SOURCES = frozenset({"collaborative", "content"})


@dataclass
class RegionStats:
    requests: int = 0
    hits: int = 0
    errors: int = 0
    personalized: int = 0  # answers with items from the user's model or session
    client_ms: list[float] = field(default_factory=list)
    edge_ms: list[float] = field(default_factory=list)


@dataclass
class DemoReport:
    seconds: float
    concurrency: int
    users: int
    regions: dict[str, RegionStats]
    feedback_sent: int = 0
    feedback_accepted: int = 0
    events_in_streams: int = 0
    model_writes: int = 0
    users_with_model: int = 0
    # ``--evaluate``: the offline evaluation of the demo's own log, as ``perso evaluate``
    # prints it (or why there is none).
    evaluation: str | None = None
    # The report folder's time series: every request, and the edges' sync histograms.
    observations: list[Observation] = field(default_factory=list)
    freshness: list[Scrape] = field(default_factory=list)

    def total(self) -> RegionStats:
        total = RegionStats()
        for stats in self.regions.values():
            total.requests += stats.requests
            total.hits += stats.hits
            total.errors += stats.errors
            total.personalized += stats.personalized
            total.client_ms += stats.client_ms
            total.edge_ms += stats.edge_ms
        return total

    def summary(self) -> dict[str, Any]:
        total = self.total()
        return {
            "seconds": round(self.seconds, 1),
            "requests": total.requests,
            "rps": round(total.requests / self.seconds, 1) if self.seconds else 0.0,
            "hit_ratio": round(ratio(total.hits, total.requests), 4),
            "p50_ms": round(percentile(total.client_ms, 50), 2),
            "p99_ms": round(percentile(total.client_ms, 99), 2),
            "errors": total.errors,
            "feedback_accepted": self.feedback_accepted,
            "events_in_streams": self.events_in_streams,
            "model_writes": self.model_writes,
            "users_with_model": self.users_with_model,
        }


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(pct / 100 * len(ordered))))
    return ordered[rank - 1]


def ratio(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def format_report(report: DemoReport) -> str:
    rows = []
    for name, stats in [*report.regions.items(), ("all", report.total())]:
        rows.append(
            [
                name,
                f"{stats.requests:,}",
                f"{100 * ratio(stats.hits, stats.requests):.1f}%",
                f"{percentile(stats.client_ms, 50):.2f}",
                f"{percentile(stats.client_ms, 99):.2f}",
                f"{percentile(stats.edge_ms, 50):.3f}",
                f"{100 * ratio(stats.personalized, stats.requests):.1f}%",
                stats.errors,
            ]
        )
    total = report.total()
    lines = [
        "",
        f"perso demo: {report.seconds:.0f} s of traffic, {report.concurrency} concurrent "
        f"browsers, {report.users:,} simulated users, {len(report.regions)} regions, "
        f"{total.requests / report.seconds if report.seconds else 0:,.0f} requests/s",
        "",
        table(
            [
                "region",
                "requests",
                "hit ratio",
                "p50 ms",
                "p99 ms",
                "edge p50 ms",
                "personalized",
                "errors",
            ],
            rows,
        ),
        "",
        f"feedback: {report.feedback_sent:,} sent, {report.feedback_accepted:,} accepted, "
        f"{report.events_in_streams:,} events appended to the events streams",
        f"user models: {report.model_writes:,} writes by the workers, "
        f"{report.users_with_model:,} of {report.users:,} users now have one",
        "(p50/p99: seen by the client on this machine; edge p50: the edge's own time;",
        " personalized: answers with items from the user's model or session)",
    ]
    if report.evaluation is not None:
        lines += [
            "",
            "offline evaluation of the demo's own log (perso evaluate):",
            report.evaluation,
        ]
    return "\n".join(lines)


class _Driver:
    def __init__(
        self, endpoints: Endpoints, traffic: Traffic, report: DemoReport, started: float
    ) -> None:
        self.endpoints = endpoints
        self.traffic = traffic
        self.report = report
        self.started = started  # time.monotonic() when the traffic began
        self.tokens = UserTokens(endpoints.origin_url, endpoints.api_key)

    async def browser(self, rng: random.Random, deadline: float) -> None:
        # One client per browser: a pool shared by many tasks costs more than it saves.
        async with httpx.AsyncClient(timeout=10.0) as client:
            await self._browse(client, rng, deadline)

    async def _browse(self, client: httpx.AsyncClient, rng: random.Random, deadline: float) -> None:
        while time.monotonic() < deadline:
            user = self.traffic.next_user(rng)
            base = self.endpoints.edges[user.region]
            stats = self.report.regions[user.region]
            failed = Observation(time.monotonic() - self.started, user.region, user.user_id, False)
            try:
                auth = await self.tokens.headers(client, user.user_id)
            except httpx.HTTPError:
                stats.requests += 1
                stats.errors += 1
                self.report.observations.append(failed)
                continue
            started = time.perf_counter()
            try:
                response = await client.post(
                    f"{base}/v1/personalize",
                    json=self.traffic.personalize_body(user, rng),
                    headers=auth,
                )
            except httpx.HTTPError:
                stats.requests += 1
                stats.errors += 1
                self.report.observations.append(failed)
                continue
            client_ms = (time.perf_counter() - started) * 1000
            stats.requests += 1
            stats.client_ms.append(client_ms)
            if response.status_code != 200:
                stats.errors += 1
                self.report.observations.append(failed)
                continue
            body = response.json()
            meta = body["metadata"]
            stats.hits += bool(meta["cache_hit"])
            stats.edge_ms.append(float(meta["latency_ms"]))
            items = body["items"]
            personalized = any(i["source"] in _PERSONAL_SOURCES for i in items)
            stats.personalized += personalized
            engaged = await self.feedback(
                client, base, user, items, request_id=body["request_id"], rng=rng, auth=auth
            )
            self.report.observations.append(
                Observation(
                    failed.t_s,
                    user.region,
                    user.user_id,
                    True,
                    hit=bool(meta["cache_hit"]),
                    personalized=personalized,
                    engaged=engaged,
                    client_ms=client_ms,
                    edge_ms=float(meta["latency_ms"]),
                )
            )

    async def feedback(
        self,
        client: httpx.AsyncClient,
        base: str,
        user: SimUser,
        items: list[dict[str, Any]],
        *,
        request_id: str,
        rng: random.Random,
        auth: dict[str, str],
    ) -> bool:
        """Whether the shopper acted on the slate (a feedback was sent)."""
        body = self.traffic.feedback_body(user, items, rng, request_id)
        if body is None:
            return False
        self.report.feedback_sent += 1
        try:
            response = await client.post(f"{base}/v1/feedback", json=body, headers=auth)
        except httpx.HTTPError:
            return True
        if response.status_code == 200:
            self.report.feedback_accepted += 1
        return True


async def drive(
    endpoints: Endpoints,
    population: list[SimUser],
    *,
    seconds: float,
    concurrency: int,
    seed: int,
) -> DemoReport:
    regions = sorted({u.region for u in population}, key=list(endpoints.edges).index)
    report = DemoReport(
        seconds=seconds,
        concurrency=concurrency,
        users=len(population),
        regions={r: RegionStats() for r in regions},
    )
    started = time.monotonic()
    deadline = started + seconds
    driver = _Driver(endpoints, Traffic(population), report, started)
    await asyncio.gather(
        poll(endpoints.edges, started, deadline, bucket_width(seconds), report.freshness),
        *(driver.browser(random.Random(seed * 1000 + n), deadline) for n in range(concurrency)),
    )
    report.seconds = time.monotonic() - started
    return report


async def wait_for_workers(redis: RedisClient, partitions: int, timeout_s: float = 15.0) -> bool:
    """True once every events partition is delivered and acknowledged by the workers."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        caught_up = True
        for stream in keys.events_streams(partitions):
            info = await redis.xinfo_stream(stream)
            groups = await redis.xinfo_groups(stream)
            last = info["last-generated-id"]
            for group in groups:
                if group["name"] == keys.WORKER_GROUP.encode() and (
                    group["pending"] > 0 or group["last-delivered-id"] != last
                ):
                    caught_up = False
        if caught_up:
            return True
        await asyncio.sleep(0.2)
    return False


async def collect_outcome(
    report: DemoReport,
    redis_url: str,
    population: list[SimUser],
    partitions: int,
    dim: int,
) -> None:
    redis = connect(redis_url)
    try:
        await wait_for_workers(redis, partitions)
        # The streams keep only their retention: count what they ever accepted.
        counts = [await redis.get(keys.events_accepted(p)) for p in range(partitions)]
        report.events_in_streams = sum(int(c) for c in counts if c is not None)
        async with redis.pipeline(transaction=False) as pipe:
            for user in population:
                pipe.get(keys.user_record(user.user_id))
            states = await pipe.execute()
        records = [decode_record(raw, dim) for raw in states if raw is not None]
        report.model_writes = sum(r.version for r in records)
        report.users_with_model = sum(1 for r in records if r.model is not None)
    finally:
        await redis.aclose()


async def evaluate_log(settings: Settings, redis_url: str, since_ms: int) -> str:
    """``DEMO_CANDIDATES`` estimated on the demo's log once its joins have closed, as
    ``perso evaluate`` prints them; or why they could not be."""
    await asyncio.sleep(settings.reward_wait_s + settings.reward_grace_s + JOIN_SLACK_S)
    redis = connect(redis_url, socket_timeout=30.0)
    try:
        result, window = await evaluate_window(
            settings,
            redis,
            DEMO_CANDIDATES,
            since_ms=since_ms,
            until_ms=int(time.time() * 1000),
            limit=EVALUATED,
            samples=300,
        )
    except ConfigError as exc:
        return f"no offline evaluation: {exc}"
    finally:
        await redis.aclose()
    return text(result, window.counts)


async def run_demo(
    settings: Settings,
    *,
    seconds: float,
    concurrency: int,
    users: int,
    seed: int,
    evaluate: bool = False,
    say: Callable[[str], None] = print,
) -> DemoReport:
    """Start the stack (fresh embedded Redis, the catalog kept in the data dir), drive it,
    collect the outcome (with ``evaluate``, estimate candidate policies on its log), stop
    it."""
    population = make_population(users, settings.regions, seed)
    # The shipped settings but one: the storefront at each edge's / works during the run,
    # its token route on. (The freshness tiers hold nothing while the workers keep up.)
    update: dict[str, object] = {"demo_tokens": True}
    say("settings as shipped, the edges' demo token route on")
    if evaluate:
        # Every ranking's context logged, and joins closed in seconds, not half a minute.
        update |= {"context_log_rate": 1.0, "reward_wait_s": DEMO_REWARD_WAIT_S}
        say(
            f"offline evaluation after the traffic: every context logged, reward window "
            f"{DEMO_REWARD_WAIT_S:.0f} s"
        )
    settings = settings.model_copy(update=update)
    with tempfile.TemporaryDirectory(prefix="perso-demo-redis-") as redis_dir:
        stack = Stack(
            settings, free_ports=True, redis_dir=Path(redis_dir), redis_persistent=False, say=say
        )
        async with stack as endpoints:
            first_edge = next(iter(endpoints.edges.values()))
            say(f"storefront {first_edge}/ while the traffic runs (demo token route on)")
            say(f"driving traffic for {seconds:.0f} s with {concurrency} browsers ...")
            started_ms = int(time.time() * 1000)
            report = await drive(
                endpoints, population, seconds=seconds, concurrency=concurrency, seed=seed
            )
            await collect_outcome(
                report,
                endpoints.redis_url,
                population,
                settings.event_partitions,
                settings.embedding_dim,
            )
            if evaluate:
                say(f"estimating {len(DEMO_CANDIDATES)} candidate policies on the demo's log ...")
                report.evaluation = await evaluate_log(settings, endpoints.redis_url, started_ms)
    return report
