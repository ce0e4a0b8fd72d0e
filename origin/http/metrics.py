"""``GET /metrics`` of an origin, in the Prometheus text format: its locks (acquire
latency, contention, lost leases), the LLM tier (explanations, cache hit rates, fallbacks
and why, calls by outcome, tokens, cost), the requests in flight and the catalog's size,
the stream workers' standing as Redis holds it (``origin.event_streams.standing``: they have no
HTTP server, and the operations page reads ``/metrics`` alone) and the last ``perso
evaluate`` run (``origin.offline.last_evaluation``). One registry per app,
never the global one; figures are read when Prometheus scrapes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from fastapi import APIRouter, Request
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.exceptions import RedisError
from starlette.responses import Response

from coordination.lock_metrics import lock_metrics
from evaluation.shadow import ShadowRunner
from origin.event_streams.standing import Standing, standing
from origin.http import health as dependencies
from origin.llm.metrics import llm_metrics
from origin.offline import last_evaluation
from origin.offline.last_evaluation import LastEvaluation
from origin.runtime import Origin
from web.health import METRICS_RESPONSES, Dependency

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# The workers' standing is left out of a scrape when Redis takes longer than this.
STANDING_TIMEOUT_S = 1.0

metrics_router = APIRouter()


class OriginCollector(Collector):
    def __init__(self, origin: Origin) -> None:
        self._origin = origin
        # Checked asynchronously by the route before each scrape (origin.http.health).
        self.dependencies: list[Dependency] = []
        self.workers: Standing | None = None  # likewise (None: Redis did not answer)
        self.evaluation: LastEvaluation | None = None  # likewise: the last perso evaluate

    def collect(self) -> Iterator[Metric]:
        origin = self._origin
        yield from lock_metrics(origin.lock, "perso_origin")
        yield from llm_metrics(origin.llm)
        for name, doc, value in (
            ("inflight", "Personalize requests being answered", origin.inflight),
            ("catalog_items", "Items in the in-memory catalog index", len(origin.index)),
        ):
            gauge = GaugeMetricFamily(f"perso_origin_{name}", doc)
            gauge.add_metric([], value)
            yield gauge
        if origin.shadow is not None:
            yield from shadow_metrics(origin.shadow)
        if self.workers is not None:
            yield from worker_metrics(self.workers)
        if self.evaluation is not None:
            yield from evaluation_metrics(self.evaluation)
        up = GaugeMetricFamily(
            "perso_origin_dependency_up",
            "1 when the dependency answered at this scrape (see /dependencies)",
            labels=["dependency"],
        )
        for dependency in self.dependencies:
            up.add_metric([dependency.name], float(dependency.up))
        yield up


def shadow_metrics(shadow: ShadowRunner) -> Iterator[Metric]:
    """Shadow mode (``origin.offline.shadow``): what was sampled and logged, and the latest
    comparison with the live policy (refreshed every minute; absent before the first)."""
    label = shadow.policy.label
    counters = shadow.counters
    for name, doc, value in (
        ("sampled", "Live decisions handed to the shadow policy", counters.sampled),
        ("logged", "Shadow decisions written to the shadow log", counters.logged),
        ("dropped", "Shadow samples dropped: the shadow's queue was full", counters.dropped),
        ("failed", "Shadow samples that could not be computed", counters.failed),
    ):
        family = CounterMetricFamily(f"perso_origin_shadow_{name}", doc, labels=["policy"])
        family.add_metric([label], value)
        yield family
    latest = shadow.latest
    if latest is None:
        return
    figures: tuple[tuple[str, str, float], ...] = (
        ("decisions", "Shadowed decisions whose joins closed, in the comparison", latest.decisions),
        ("live_engagement", "The live policy's engagements per slate on them", latest.live_value),
        ("engagement", "The shadow's estimated engagements per slate (SNIPS)", latest.shadow_snips),
        ("engagement_low", "The lower end of its 95% bootstrap interval", latest.low),
        ("engagement_high", "The upper end of its 95% bootstrap interval", latest.high),
        ("ess", "The estimate's effective sample size", latest.ess),
    )
    for metric, text, figure in figures:
        gauge = GaugeMetricFamily(f"perso_origin_shadow_{metric}", text, labels=["policy", "live"])
        gauge.add_metric([label, latest.live], figure)
        yield gauge


def worker_metrics(found: Standing) -> Iterator[Metric]:
    """The stream workers' standing (the same on every origin: one Redis)."""
    backlog = GaugeMetricFamily(
        "perso_worker_backlog",
        "Feedback events of the partition not yet applied (undelivered and pending)",
        labels=["partition"],
    )
    for partition, count in sorted(found.backlog.items()):
        backlog.add_metric([str(partition)], count)
    yield backlog
    entries = CounterMetricFamily(
        "perso_worker_entries",
        "Stream entries the consumer read, over all its runs",
        labels=["consumer"],
    )
    for consumer, count in sorted(found.entries.items()):
        entries.add_metric([consumer], count)
    yield entries
    freshness = GaugeMetricFamily(
        "perso_worker_freshness_p99_seconds",
        "Accepted to applied, 99th percentile, of the running worker's recent events",
        labels=["consumer"],
    )
    for consumer, ms in sorted(found.freshness_p99_ms.items()):
        freshness.add_metric([consumer], ms / 1000)
    yield freshness


def evaluation_metrics(last: LastEvaluation) -> Iterator[Metric]:
    """The last ``perso evaluate`` run (``origin.offline.last_evaluation``)."""
    at = GaugeMetricFamily(
        "perso_evaluation_last_timestamp_seconds", "When the last perso evaluate ran"
    )
    at.add_metric([], last.at_ms / 1000)
    yield at
    joined = GaugeMetricFamily(
        "perso_evaluation_last_joined", "Decisions with a closed join it estimated on"
    )
    joined.add_metric([], last.joined)
    yield joined
    live = GaugeMetricFamily(
        "perso_evaluation_last_live_engagement",
        "The live policy's own engagements per slate in its window",
        labels=["policy"],
    )
    live.add_metric([last.live], last.live_value)
    yield live
    labels = ["policy", "estimator"]
    families = {
        "": GaugeMetricFamily(
            "perso_evaluation_last_engagement",
            "A candidate's estimated engagements per slate",
            labels=labels,
        ),
        "_low": GaugeMetricFamily(
            "perso_evaluation_last_engagement_low", "Its 95% interval's lower end", labels=labels
        ),
        "_high": GaugeMetricFamily(
            "perso_evaluation_last_engagement_high", "Its 95% interval's upper end", labels=labels
        ),
    }
    for e in last.estimates:
        for suffix, value in (("", e.value), ("_low", e.low), ("_high", e.high)):
            families[suffix].add_metric([e.policy, e.estimator], value)
    yield from families.values()


async def read_standing(origin: Origin) -> tuple[Standing | None, LastEvaluation | None]:
    """The workers' standing and the last evaluation, or None for each Redis did not give
    within ``STANDING_TIMEOUT_S``."""
    try:
        return await asyncio.wait_for(
            asyncio.gather(
                standing(origin.redis, origin.settings.event_partitions),
                last_evaluation.read(origin.redis),
            ),
            STANDING_TIMEOUT_S,
        )
    except (RedisError, OSError, TimeoutError):
        return None, None


@metrics_router.get("/metrics", response_class=Response, responses=METRICS_RESPONSES)
async def metrics(request: Request) -> Response:
    registry: CollectorRegistry | None = getattr(request.app.state, "metrics_registry", None)
    collector: OriginCollector
    if registry is None:
        registry = CollectorRegistry(auto_describe=False)
        collector = OriginCollector(request.app.state.origin)
        registry.register(collector)
        request.app.state.metrics_registry = registry
        request.app.state.metrics_collector = collector
    collector = request.app.state.metrics_collector
    collector.dependencies = await dependencies.check(request.app.state.origin)
    collector.workers, collector.evaluation = await read_standing(request.app.state.origin)
    return Response(generate_latest(registry), media_type=CONTENT_TYPE)
