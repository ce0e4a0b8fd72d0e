"""``GET /metrics`` of an edge, in the Prometheus text format.

The hit path only increments plain integers (``edge.node.EdgeCounters``, the coalescer's,
the origins' and their circuit breakers' counters); this collector reads them when
Prometheus scrapes, so measuring costs the requests nothing. One registry per app, never
the global one. The origins' families are ``edge.http.origin_metrics``', those of the
ranking the edge does itself ``edge.http.ranking_metrics``'.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from edge.cache.redis_store import RedisEntryStore
from edge.http.dependencies import check
from edge.http.metric_families import region_counters
from edge.http.origin_metrics import origin_metrics
from edge.http.ranking_metrics import (
    own_candidate_metrics,
    run_bank_metrics,
    shadow_metrics,
    user_model_metrics,
)
from edge.node import Edge
from edge.sync_apply import SyncApplier
from sync.subscriber import SyncSubscriber
from web.health import Dependency

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class EdgeCollector(Collector):
    def __init__(self, edge: Edge, subscriber: SyncSubscriber | None) -> None:
        self._edge = edge
        self._subscriber = subscriber
        # The store's size is asynchronous to read (a PoP-local Redis): the /metrics route
        # reads it before each scrape and leaves it here.
        self.entries = 0
        self.behind_ms = 0  # likewise: how far the cursor trails the stream's newest entry
        self.dependencies: list[Dependency] = []  # likewise: edge.dependencies.check

    def collect(self) -> Iterator[Metric]:
        edge = self._edge
        labels = ["region"]
        region = [edge.region]
        yield from _answer_metrics(edge, labels, region)
        yield from _explain_metrics(edge, labels, region)
        yield from _counter_metrics(edge, labels, region)
        yield from origin_metrics(edge, labels, region)
        yield from _cache_metrics(edge, self.entries, labels, region)
        yield from _sync_metrics(self._subscriber, edge.sync, labels, region)
        if self._subscriber is not None:
            behind = GaugeMetricFamily(
                "perso_edge_sync_cursor_lag_seconds",
                "Stream time between the newest entry and the edge's cursor",
                labels=labels,
            )
            behind.add_metric(region, self.behind_ms / 1000)
            yield behind
        yield from _prewarm_metrics(edge, labels, region)
        yield from _pop_metrics(edge, labels, region)

        users = GaugeMetricFamily(
            "perso_edge_known_users", "Users whose feedback the edge remembers", labels=labels
        )
        users.add_metric(region, len(edge.views))
        yield users
        yield from user_model_metrics(edge, labels, region)
        yield from run_bank_metrics(edge, labels, region)
        yield from shadow_metrics(edge, labels, region)
        yield from own_candidate_metrics(edge, labels, region)
        yield from _feedback_spool_metrics(edge, labels, region)
        yield from _dependency_metrics(self.dependencies, labels, region)


def _answer_metrics(edge: Edge, labels: list[str], region: list[str]) -> Iterator[Metric]:
    """Personalize answers by how they were served, and how long they took."""
    c = edge.counters
    answers = CounterMetricFamily(
        "perso_edge_answers",
        "Personalize answers by how they were served",
        labels=[*labels, "served"],
    )
    for served, value in (
        ("hit", c.hits),
        ("miss", c.misses),
        ("stale", c.stale_served),
        ("popular", c.popular_served),
        ("not_modified", c.not_modified),
    ):
        answers.add_metric([*region, served], value)
    yield answers
    latency = HistogramMetricFamily(
        "perso_edge_personalize_seconds",
        "Personalize requests, body read to answer, in this process",
        labels=labels,
    )
    latency.add_metric(region, c.latency.cumulative(), sum_value=c.latency.sum_ms / 1000)
    yield latency


def _counter_metrics(edge: Edge, labels: list[str], region: list[str]) -> Iterator[Metric]:
    """What the edge's requests, fills and coalescing count."""
    c = edge.counters
    yield from region_counters(
        (
            ("rate_limited", "Requests over their tier's rate limit", c.rate_limited),
            ("revalidations", "Background refreshes started ahead of expiry", c.revalidations),
            ("ranked_here", "Answers the edge ranked itself from a pool", c.ranked_here),
            (
                "ranked_from_bank",
                "Of those, the ones served a run of the user's bank, drawn before",
                c.ranked_from_bank,
            ),
            ("pool_fills", "Candidate pools filled from the origin", c.pool_fills),
            (
                "fills",
                "Answers the origin ranked for this process's fills (misses, refreshes, "
                "pre-warms; pool fills apart)",
                c.fills,
            ),
            ("user_fetches", "Users' states asked of the origin", c.user_fetches),
            ("coalesce_leaders", "Fills a request made for its key", edge.coalescer.leaders),
            (
                "coalesce_followers",
                "Requests that waited for another's fill",
                edge.coalescer.followers,
            ),
            (
                "coalesce_timeouts",
                "Followers that stopped waiting and fetched",
                edge.coalescer.timeouts,
            ),
        ),
        labels,
        region,
    )


def _cache_metrics(
    edge: Edge, stored: int, labels: list[str], region: list[str]
) -> Iterator[Metric]:
    """What the edge holds to answer from: the popular list's items, and the entries
    ``stored`` in its store."""
    popular = GaugeMetricFamily(
        "perso_edge_popular_items", "Items of the region's popular list", labels=labels
    )
    popular.add_metric(region, len(edge.popular.entry.items) if edge.popular.entry else 0)
    yield popular

    entries = GaugeMetricFamily(
        "perso_edge_cache_entries", "Entries in the edge's store", labels=labels
    )
    entries.add_metric(region, stored)
    yield entries


def _dependency_metrics(
    dependencies: list[Dependency], labels: list[str], region: list[str]
) -> Iterator[Metric]:
    up = GaugeMetricFamily(
        "perso_edge_dependency_up",
        "1 when the dependency answered at this scrape (see /dependencies)",
        labels=[*labels, "dependency"],
    )
    for dependency in dependencies:
        up.add_metric([*region, dependency.name], float(dependency.up))
    yield up


def _sync_metrics(
    subscriber: SyncSubscriber | None,
    applier: SyncApplier | None,
    labels: list[str],
    region: list[str],
) -> Iterator[Metric]:
    if subscriber is None or applier is None:
        return
    stats = subscriber.stats
    yield from region_counters(
        (
            ("sync_applied", "Sync messages applied", stats.applied),
            ("sync_malformed", "Sync entries that could not be read (skipped)", stats.malformed),
            ("sync_gaps", "Gaps found in the sync stream (entries soft-purged)", stats.gaps),
            ("sync_reconnects", "Reconnections to the sync stream's Redis", stats.reconnects),
            ("sync_errors", "Redis failures met by the subscriber", stats.errors),
        ),
        labels,
        region,
    )
    lag = GaugeMetricFamily(
        "perso_edge_sync_lag_seconds",
        "Publish to applied of the last message applied",
        labels=labels,
    )
    lag.add_metric(region, (stats.lag_ms or 0.0) / 1000)
    yield lag
    seq = GaugeMetricFamily(
        "perso_edge_sync_last_seq", "Origin sequence last applied", labels=labels
    )
    seq.add_metric(region, stats.last_seq or 0)
    yield seq
    by_type = CounterMetricFamily(
        "perso_edge_sync_messages", "Sync messages applied by type", labels=[*labels, "type"]
    )
    for kind, count in sorted(applier.counters.by_type.items()):
        by_type.add_metric([*region, kind], count)
    yield by_type
    latency = applier.counters.latency
    histogram = HistogramMetricFamily(
        "perso_edge_sync_publish_to_applied_seconds",
        "Publish (origin clock) to applied (edge clock)",
        labels=labels,
    )
    histogram.add_metric(region, latency.cumulative(), sum_value=latency.sum_ms / 1000)
    yield histogram


def _feedback_spool_metrics(edge: Edge, labels: list[str], region: list[str]) -> Iterator[Metric]:
    """Feedback held on the edge's disk while no origin could take it
    (``edge.origins.feedback_spool``)."""
    spool = edge.feedback_spool
    if spool is None:
        return
    gauge = GaugeMetricFamily(
        "perso_edge_feedback_held",
        "Feedback requests held on this edge process's disk, not yet handed on",
        labels=labels,
    )
    gauge.add_metric(region, len(spool))
    yield gauge
    c = spool.counters
    family = CounterMetricFamily(
        "perso_edge_feedback_spool",
        "Feedback requests the origin could not take: held, handed on, refused by the origin "
        "(dropped), refused for a full spool, adopted from a gone process, set aside (a bug)",
        labels=[*labels, "what"],
    )
    for what, value in (
        ("held", c.held),
        ("forwarded", c.forwarded),
        ("dropped", c.dropped),
        ("full", c.full),
        ("adopted", c.adopted),
        ("set_aside", c.set_aside),
    ):
        family.add_metric([*region, what], value)
    yield family


def _explain_metrics(edge: Edge, labels: list[str], region: list[str]) -> Iterator[Metric]:
    c = edge.explain_counters
    answers = CounterMetricFamily(
        "perso_edge_explain_answers",
        "Explain answers by how they were served (forwarded: personal, never cached)",
        labels=[*labels, "served"],
    )
    for served, value in (
        ("hit", c.hits),
        ("miss", c.misses),
        ("stale", c.stale),
        ("forwarded", c.forwarded),
    ):
        answers.add_metric([*region, served], value)
    yield answers
    limited = CounterMetricFamily(
        "perso_edge_explain_rate_limited",
        "Explain requests over their tier's rate limit (answered from the cache, or 429)",
        labels=labels,
    )
    limited.add_metric(region, c.rate_limited)
    yield limited
    entries = GaugeMetricFamily(
        "perso_edge_explain_cache_entries", "Segment explanations the edge holds", labels=labels
    )
    entries.add_metric(region, len(edge.explanations))
    yield entries


def _pop_metrics(edge: Edge, labels: list[str], region: list[str]) -> Iterator[Metric]:
    """What the PoP store decides for this process: rate limits (``edge.limits.pop_rate_limit``;
    ``decided_by="process"``: failed open to the process's own buckets) and fill leases
    (``edge.cache.fill_lease``). Absent without a PoP store."""
    limiter, leases = edge.pop_limiter, edge.fill_leases
    if isinstance(edge.store, RedisEntryStore):
        store_failures = CounterMetricFamily(
            "perso_edge_store_failures",
            "Reads and writes the PoP store failed: each read served as a miss (the origin "
            "filled it), each write not kept",
            labels=labels,
        )
        store_failures.add_metric(region, edge.store.failures)
        yield store_failures
    if limiter is not None:
        checks = CounterMetricFamily(
            "perso_edge_rate_limit_checks",
            "Rate-limit checks by what decided them: the PoP store's shared limits, or this "
            "process's own buckets while the store was unreachable (fail-open)",
            labels=[*labels, "decided_by"],
        )
        checks.add_metric([*region, "pop"], limiter.counters.shared)
        checks.add_metric([*region, "process"], limiter.counters.process)
        yield checks
        errors = CounterMetricFamily(
            "perso_edge_rate_limit_store_errors",
            "Rate-limit checks the PoP store failed (each decided by the process instead)",
            labels=labels,
        )
        errors.add_metric(region, limiter.counters.store_errors)
        yield errors
    if leases is not None:
        fills = CounterMetricFamily(
            "perso_edge_pop_fills",
            "Fills of this process's leaders among the PoP's processes: led (holding the "
            "key's lease), found (the lease's holder found the entry stored already), "
            "followed (served another process's entry), waited_out (filled after "
            "PERSO_EDGE_COALESCE_WAIT_MS), unreachable (the store failed: no lease)",
            labels=[*labels, "outcome"],
        )
        counters = leases.counters
        for outcome, value in (
            ("led", counters.led),
            ("found", counters.found),
            ("followed", counters.followed),
            ("waited_out", counters.waited_out),
            ("unreachable", counters.unreachable),
        ):
            fills.add_metric([*region, outcome], value)
        yield fills


def _prewarm_metrics(edge: Edge, labels: list[str], region: list[str]) -> Iterator[Metric]:
    counters = edge.prewarmer.counters
    family = CounterMetricFamily(
        "perso_edge_prewarms",
        "Pre-warms of returning users' next keys",
        labels=[*labels, "outcome"],
    )
    for outcome, value in (
        ("scheduled", counters.scheduled),
        ("rescheduled", counters.rescheduled),
        ("filled", counters.filled),
        ("already_filled", counters.already_filled),
        ("over_budget", counters.over_budget),
        ("failed", counters.failed),
    ):
        family.add_metric([*region, outcome], value)
    yield family


class EdgeMetrics:
    def __init__(self, edge: Edge, subscriber: SyncSubscriber | None = None) -> None:
        self._edge = edge
        self._subscriber = subscriber
        self._collector = EdgeCollector(edge, subscriber)
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(self._collector)

    async def exposition(self) -> bytes:
        self._collector.entries = await self._edge.store.size()
        self._collector.dependencies = await check(self._edge, self._subscriber)
        if self._subscriber is not None:
            self._collector.behind_ms = await self._subscriber.behind_ms()
        return generate_latest(self._registry)
