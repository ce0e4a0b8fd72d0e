"""``perso demo``'s freshness: how long a change the origin publishes (a shopper's new model,
an invalidation) takes to be applied at each region's edge.

The edges count it themselves (``perso_edge_sync_publish_to_applied_seconds``, a histogram
on their ``/metrics``); the demo scrapes it every few seconds while the traffic runs. The
parsing and the arithmetic on cumulative buckets are pure; ``poll`` is the scraper.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

METRIC = "perso_edge_sync_publish_to_applied_seconds"
# (upper bound in seconds, cumulative count), ascending, ``inf`` last: as Prometheus has it.
Histogram = list[tuple[float, float]]


@dataclass(frozen=True, slots=True)
class Scrape:
    t_s: float  # since the traffic started
    by_region: dict[str, Histogram]


def parse(text: str) -> dict[str, Histogram]:
    """The publish-to-applied histogram of each region in an edge's ``/metrics`` text."""
    out: dict[str, Histogram] = {}
    for family in text_string_to_metric_families(text):
        if family.name != METRIC:
            continue
        for sample in family.samples:
            if sample.name == f"{METRIC}_bucket":
                region = sample.labels.get("region", "")
                out.setdefault(region, []).append((float(sample.labels["le"]), sample.value))
    return {region: sorted(buckets) for region, buckets in out.items()}


def difference(later: Histogram, earlier: Histogram | None) -> Histogram:
    """What was observed between two scrapes of one histogram (``earlier`` None: since the
    start)."""
    if not earlier:
        return list(later)
    before = dict(earlier)
    return [(bound, count - before.get(bound, 0.0)) for bound, count in later]


def total(histogram: Histogram) -> float:
    return histogram[-1][1] if histogram else 0.0


def quantile(histogram: Histogram, q: float) -> float | None:
    """The ``q`` quantile (0-1), interpolated linearly inside its bucket as Prometheus'
    ``histogram_quantile`` does; the highest finite bound when it falls past it; None for
    an empty histogram."""
    count = total(histogram)
    if count <= 0:
        return None
    rank = q * count
    lower, below = 0.0, 0.0
    for bound, cumulative in histogram:
        if cumulative >= rank:
            if math.isinf(bound):
                return lower
            inside = cumulative - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = bound, cumulative
    return lower


def per_interval(scrapes: list[Scrape], region: str, q: float) -> list[tuple[float, float | None]]:
    """``(t_s, quantile)`` of what each interval between scrapes observed in ``region``."""
    out: list[tuple[float, float | None]] = []
    previous: Histogram | None = None
    for scrape in scrapes:
        current = scrape.by_region.get(region)
        if current is None:
            continue
        out.append((scrape.t_s, quantile(difference(current, previous), q)))
        previous = current
    return out


async def scrape(client: httpx.AsyncClient, edges: Mapping[str, str]) -> dict[str, Histogram]:
    """Every edge's histogram by region; an edge that does not answer is left out."""
    out: dict[str, Histogram] = {}
    for base in edges.values():
        try:
            response = await client.get(f"{base}/metrics")
        except httpx.HTTPError:
            continue
        if response.status_code == 200:
            out |= parse(response.text)
    return out


async def poll(
    edges: Mapping[str, str], started: float, deadline: float, every_s: float, out: list[Scrape]
) -> None:
    """Scrape every ``every_s`` from now to ``deadline`` (``time.monotonic`` readings) and
    once more after it, appending to ``out``."""
    async with httpx.AsyncClient(timeout=5.0) as client:
        while True:
            now = time.monotonic()
            out.append(Scrape(now - started, await scrape(client, edges)))
            if now >= deadline:
                return
            await asyncio.sleep(min(every_s, max(0.0, deadline - now)))
