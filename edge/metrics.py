"""``GET /metrics`` of an edge, in the Prometheus text format.

The hit path only increments plain integers (``service.EdgeCounters``, the coalescer's and
the circuit breaker's counters); this collector reads them when Prometheus scrapes, so
measuring costs the requests nothing. One registry per app, never the global one.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from edge.circuit_breaker import State
from edge.service import Edge

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class EdgeCollector(Collector):
    def __init__(self, edge: Edge) -> None:
        self._edge = edge
        # The store's size is asynchronous to read (a PoP-local Redis): the /metrics route
        # reads it before each scrape and leaves it here.
        self.entries = 0

    def collect(self) -> Iterator[Metric]:
        edge = self._edge
        c = edge.counters
        labels = ["region"]
        region = [edge.region]

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

        for name, doc, value in (
            ("rate_limited", "Requests over their tier's rate limit", c.rate_limited),
            ("revalidations", "Background refreshes started ahead of expiry", c.revalidations),
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
            (
                "origin_circuit_opened",
                "Times the origin circuit opened",
                edge.origin.breaker.opened_total,
            ),
            (
                "origin_circuit_rejected",
                "Origin calls refused by the open circuit",
                edge.origin.breaker.rejected_total,
            ),
        ):
            family = CounterMetricFamily(f"perso_edge_{name}", doc, labels=labels)
            family.add_metric(region, value)
            yield family

        circuit = GaugeMetricFamily(
            "perso_edge_origin_circuit_state",
            "1 for the circuit's current state",
            labels=[*labels, "state"],
        )
        for state in State:
            circuit.add_metric([*region, state.value], float(edge.origin.breaker.state is state))
        yield circuit

        popular = GaugeMetricFamily(
            "perso_edge_popular_items", "Items of the region's popular list", labels=labels
        )
        popular.add_metric(region, len(edge.popular.entry.items) if edge.popular.entry else 0)
        yield popular

        entries = GaugeMetricFamily(
            "perso_edge_cache_entries", "Entries in the edge's store", labels=labels
        )
        entries.add_metric(region, self.entries)
        yield entries

        users = GaugeMetricFamily(
            "perso_edge_known_users", "Users whose feedback the edge remembers", labels=labels
        )
        users.add_metric(region, len(edge.views))
        yield users


class EdgeMetrics:
    def __init__(self, edge: Edge) -> None:
        self._edge = edge
        self._collector = EdgeCollector(edge)
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(self._collector)

    async def exposition(self) -> bytes:
        self._collector.entries = await self._edge.store.size()
        return generate_latest(self._registry)
