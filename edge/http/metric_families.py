"""The one way the edge's ``/metrics`` turns a table of counters into families: each row
``(name, help, value)`` a counter ``perso_edge_<name>`` under the region's labels."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, Metric


def region_counters(
    table: Iterable[tuple[str, str, float]], labels: list[str], region: list[str]
) -> Iterator[Metric]:
    for name, doc, value in table:
        family = CounterMetricFamily(f"perso_edge_{name}", doc, labels=labels)
        family.add_metric(region, value)
        yield family
