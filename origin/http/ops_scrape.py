"""What the operations page shows, gathered: every process of the registry
(``coordination.registry``) scraped at its ``/metrics``, in parallel, each within
``SCRAPE_TIMEOUT_S`` (a slow or dead process never stalls the others), and turned into
figures (``origin.http.ops_figures``) against this origin's previous scrape of it.

``/metrics`` is the one source: the workers' figures come from an origin's, the learning
curve alone is read from Redis (``keys.learning_curve``: a series by minute, which a
Prometheus exposition has no place for). Redis down, the last registry read stands in.
The previous scrapes are this process's memory, one per registered URL (none other).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx
from redis.exceptions import RedisError

from coordination.registry import SILENT_S, Registered, registered
from origin.http import ops_figures as figures
from protocol import keys
from protocol.scrape_networks import (
    DEFAULT_NETWORKS,
    Network,
    host_of,
    literal_address,
    parse_networks,
    refusal,
)
from redis_client.client import RedisClient

SCRAPE_TIMEOUT_S = 1.5
REDIS_TIMEOUT_S = 1.0
# A scrape replaces the kept one once this much newer: rates over at least a second, even
# when two pages poll at once.
MIN_INTERVAL_S = 1.0
CURVE_MINUTES = 60
# The workers publish their counters every few seconds (their upkeep, at most 5 s): their
# rate is taken over this much at least, or it would swing between 0 and twice the truth.
WORKER_INTERVAL_S = 15.0
# Scrapes kept for it: a poll every 2 s needs 8; several pages polling at once, a few more.
WORKER_KEPT = 64


DEFAULT = parse_networks(DEFAULT_NETWORKS)
Resolve = Callable[[str], Awaitable[list[str]]]


async def resolved(host: str) -> list[str]:
    """Every address ``host`` resolves to (the system's resolver, off the event loop)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, None)
    return sorted({str(info[4][0]) for info in infos})


@dataclass(frozen=True)
class Scraped:
    target: Registered
    sample: figures.Sample | None
    error: str | None


class OpsScraper:
    """Scrapes on demand (each ``GET /v1/admin/ops``); keeps each target's last scrape."""

    def __init__(
        self,
        redis: RedisClient,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        transport: httpx.AsyncBaseTransport | None = None,
        networks: Sequence[Network] = DEFAULT,
        resolve: Resolve | None = None,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self._redis = redis
        self._networks = tuple(networks)
        self._resolve = resolve or resolved
        self._clock = clock
        self._monotonic = monotonic
        self._http = httpx.AsyncClient(timeout=SCRAPE_TIMEOUT_S, transport=transport, verify=verify)
        self._previous: dict[str, figures.Sample] = {}
        # The origin's scrapes the workers' rate is taken against, oldest first.
        self._workers_kept: deque[figures.Sample] = deque(maxlen=WORKER_KEPT)
        self._targets: list[Registered] = []

    async def __aenter__(self) -> OpsScraper:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._http.aclose()

    async def targets(self) -> tuple[list[Registered], str | None]:
        """The registry now, or the last one read and why (Redis unreachable)."""
        try:
            now_ms = int(self._clock() * 1000)
            self._targets = await asyncio.wait_for(registered(self._redis, now_ms), REDIS_TIMEOUT_S)
        except (RedisError, OSError, TimeoutError) as exc:
            return self._targets, f"registry unreadable ({type(exc).__name__}): last known"
        return self._targets, None

    async def refused(self, url: str) -> str | None:
        """Why ``url`` must not be fetched (``protocol.scrape_networks``); None: it may."""
        host = host_of(url)
        if host is None:
            return "refused: not an http(s) URL without credentials"
        literal = literal_address(host)
        if literal is not None:
            addresses = [str(literal)]
        else:
            try:
                addresses = await asyncio.wait_for(self._resolve(host), SCRAPE_TIMEOUT_S)
            except (OSError, TimeoutError) as exc:
                return f"unreachable (name not resolved: {type(exc).__name__})"
        why = refusal(addresses, self._networks)
        return None if why is None else f"refused: {why}"

    async def scrape(self, target: Registered) -> Scraped:
        why = await self.refused(target.url)
        if why is not None:
            return Scraped(target, None, why)
        try:
            answer = await asyncio.wait_for(
                self._http.get(target.url + "/metrics"), SCRAPE_TIMEOUT_S
            )
            answer.raise_for_status()
            return Scraped(target, figures.parse(answer.text, self._monotonic()), None)
        except TimeoutError:
            return Scraped(target, None, f"no answer within {SCRAPE_TIMEOUT_S} s")
        except httpx.HTTPStatusError as exc:
            return Scraped(target, None, f"/metrics answered {exc.response.status_code}")
        except httpx.HTTPError as exc:
            return Scraped(target, None, f"unreachable ({type(exc).__name__})")
        except ValueError:
            return Scraped(target, None, "/metrics is not in the Prometheus text format")

    async def curve(self) -> list[dict[str, float | int]]:
        """The last hour's minutes of the learning curve (none when Redis fails)."""
        now_minute = int(self._clock() // 60)
        minutes = range(now_minute - CURVE_MINUTES + 1, now_minute + 1)
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for minute in minutes:
                    pipe.hmget(keys.learning_curve(minute), ["slates", "clicks"])
                found = await asyncio.wait_for(pipe.execute(), REDIS_TIMEOUT_S)
        except (RedisError, OSError, TimeoutError):
            return []
        return figures.curve(
            (minute, int(slates or 0), int(clicks or 0))
            for minute, (slates, clicks) in zip(minutes, found, strict=True)
        )

    def _against_previous(self, scraped: Scraped) -> figures.Sample | None:
        """The kept scrape of the target to compare ``scraped`` with; keeps ``scraped``
        in its place when it is ``MIN_INTERVAL_S`` newer (or the first)."""
        url = scraped.target.url
        previous = self._previous.get(url)
        sample = scraped.sample
        if sample is not None and (
            previous is None or sample.at_s - previous.at_s >= MIN_INTERVAL_S
        ):
            self._previous[url] = sample
        return previous

    def _workers(self, sample: figures.Sample) -> dict[str, Any]:
        """The workers' figures against the newest kept scrape ``WORKER_INTERVAL_S`` old or
        more (the oldest kept, at first), from any origin: they all read the same Redis."""
        previous = figures.baseline(self._workers_kept, sample, WORKER_INTERVAL_S)
        return figures.worker_figures(previous, sample)

    async def report(self) -> dict[str, Any]:
        targets, registry_error = await self.targets()
        scraped, learning = await asyncio.gather(
            asyncio.gather(*(self.scrape(t) for t in targets)), self.curve()
        )
        now_ms = int(self._clock() * 1000)
        kept = {t.url for t in targets}
        for url in list(self._previous):
            if url not in kept:
                del self._previous[url]
        edges: list[dict[str, Any]] = []
        origins: list[dict[str, Any]] = []
        growth: dict[str, list[figures.EdgeGrowth]] = {}
        workers: dict[str, Any] | None = None
        shadow: dict[str, Any] | None = None
        offline: dict[str, Any] | None = None
        for one in scraped:
            previous = self._against_previous(one)
            row = describe(one, now_ms)
            if one.target.kind == "edge":
                if one.sample is not None:
                    row |= figures.edge_figures(previous, one.sample)
                    growth.setdefault(one.target.region, []).append(
                        figures.edge_growth(previous, one.sample)
                    )
                edges.append(row)
                continue
            if one.sample is not None:
                row |= figures.origin_figures(previous, one.sample)
                if workers is None:
                    workers = self._workers(one.sample) | {"from": one.target.url}
                shadow = shadow or figures.evaluation(one.sample)
                offline = offline or figures.last_evaluation(one.sample)
            origins.append(row)
        return {
            "now_ms": now_ms,
            "registry_error": registry_error,
            "regions": regions(edges, growth),
            "edges": edges,
            "origins": origins,
            "workers": workers,
            "learning_curve": learning,
            "evaluation": shadow,
            "last_evaluation": offline,
        }


def describe(scraped: Scraped, now_ms: int) -> dict[str, Any]:
    """Who the target is and whether it answered: ``up``, or ``unreachable`` with why;
    ``silent`` says its heartbeat stopped (``SILENT_S``) though it may still answer."""
    target = scraped.target
    seen_s = max(0.0, (now_ms - target.seen_ms) / 1000)
    return {
        "name": target.name,
        "kind": target.kind,
        "region": target.region,
        "url": target.url,
        "status": "up" if scraped.sample is not None else "unreachable",
        "error": scraped.error,
        "seen_s_ago": round(seen_s, 1),
        "silent": seen_s > SILENT_S,
    }


def regions(
    edges: list[dict[str, Any]], growth: dict[str, list[figures.EdgeGrowth]]
) -> list[dict[str, Any]]:
    """One row per region: its processes, how many answer, and what they served together."""
    names = sorted({e["region"] for e in edges})
    out = []
    for name in names:
        members = [e for e in edges if e["region"] == name]
        up = sum(1 for e in members if e["status"] == "up")
        out.append(
            {
                "region": name,
                "processes": len(members),
                "up": up,
                **figures.served(growth.get(name, [])),
            }
        )
    return out
