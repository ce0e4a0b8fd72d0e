"""The edge's origins in ``GET /metrics`` (``edge.http.metrics``): what the client of the
origins counts, the circuit to the origins as a whole, and each origin's own state
(``edge.origins.client``, ``edge.origins.link``)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from edge.http.metric_families import region_counters
from edge.node import Edge
from resilience.circuit_breaker import State


def origin_metrics(edge: Edge, labels: list[str], region: list[str]) -> Iterator[Metric]:
    """The origins as a whole: the client's counters and the circuit's state; then each
    origin's (``_origins_metrics``)."""
    yield from region_counters(
        (
            (
                "origin_circuit_opened",
                "Times an origin's circuit opened (all origins)",
                edge.origin.circuits_opened,
            ),
            (
                "origin_circuit_rejected",
                "Origin calls refused without a network call: every origin's circuit open",
                edge.origin.refused,
            ),
            (
                "origin_panics",
                "Attempts sent to an ejected or unhealthy origin: none was left in rotation",
                edge.origin.panics,
            ),
        ),
        labels,
        region,
    )

    circuit = GaugeMetricFamily(
        "perso_edge_origin_circuit_state",
        "1 for the current state of the circuit to the origins as a whole (closed while "
        "any origin's is)",
        labels=[*labels, "state"],
    )
    current = edge.origin.circuit_state()
    for state in State:
        circuit.add_metric([*region, state.value], float(current is state))
    yield circuit
    yield from _origins_metrics(edge, labels, region)


def _origins_metrics(edge: Edge, labels: list[str], region: list[str]) -> Iterator[Metric]:
    """Each origin of the edge (``edge.origins.rotation``), labelled by its URL."""
    per_origin = [*labels, "origin"]
    families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
        "up": GaugeMetricFamily(
            "perso_edge_origin_up",
            "1 while the origin's last health check (GET /readyz) passed; absent before the "
            "first (an edge of one origin does not check it)",
            labels=per_origin,
        ),
        "ejected": GaugeMetricFamily(
            "perso_edge_origin_ejected",
            "1 while the origin is ejected from the rotation",
            labels=per_origin,
        ),
        "inflight": GaugeMetricFamily(
            "perso_edge_origin_inflight", "Attempts the origin is answering now", labels=per_origin
        ),
        "requests": CounterMetricFamily(
            "perso_edge_origin_requests", "Attempts sent to the origin", labels=per_origin
        ),
        "outages": CounterMetricFamily(
            "perso_edge_origin_outages",
            "Attempts that ended in an outage (transport failure, timeout, 429, 502, 503, 504)",
            labels=per_origin,
        ),
        "ejections": CounterMetricFamily(
            "perso_edge_origin_ejections",
            "Times the origin was ejected from the rotation",
            labels=per_origin,
        ),
    }
    circuits = GaugeMetricFamily(
        "perso_edge_origin_circuit",
        "1 for the current state of each origin's circuit",
        labels=[*per_origin, "state"],
    )
    for link in edge.origin.links:
        at = [*region, link.url]
        if link.standing.ready is not None:
            families["up"].add_metric(at, float(link.standing.ready))
        for name, value in (
            ("ejected", link.ejected()),
            ("inflight", link.inflight),
            ("requests", link.requests),
            ("outages", link.outages),
            ("ejections", link.ejections),
        ):
            families[name].add_metric(at, float(value))
        for state in State:
            circuits.add_metric([*at, state.value], float(link.breaker.state is state))
    yield from families.values()
    yield circuits
