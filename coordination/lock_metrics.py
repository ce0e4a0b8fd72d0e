"""Prometheus families of a process's locks (``coordination.instrumented.LockStats``), for
the ``/metrics`` of whichever process holds them. Read at scrape time: the lock paths only
increment integers."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from coordination.instrumented import InstrumentedLock


def lock_metrics(lock: InstrumentedLock, prefix: str) -> Iterator[Metric]:
    """The Prometheus families of ``lock``, named ``<prefix>_...`` (e.g. ``perso_origin``):
    counters of grants, contention, give-ups, releases, lost leases, extensions and forced
    releases, the acquire latency histogram in seconds, and a gauge of the resources held
    now. Built from the counters at each scrape."""
    stats = lock.stats
    for name, doc, value in (
        ("lock_grants", "Leases granted to this process", stats.grants),
        (
            "lock_contended",
            "Acquire attempts that found the resource held (one per retry)",
            stats.contended,
        ),
        ("lock_gave_up", "Acquires that ran out of attempts", stats.gave_up),
        ("lock_releases", "Leases released by their holder", stats.releases),
        (
            "lock_lost",
            "Releases or extensions refused: the lease had lapsed or changed hands",
            stats.lost,
        ),
        ("lock_extensions", "Leases extended", stats.extensions),
        ("lock_forced_releases", "Resources force-released by an operator", stats.forced_releases),
    ):
        family = CounterMetricFamily(f"{prefix}_{name}", doc)
        family.add_metric([], value)
        yield family
    latency = stats.acquire_latency
    histogram = HistogramMetricFamily(
        f"{prefix}_lock_acquire_seconds", "From acquire to grant, retries included"
    )
    histogram.add_metric([], latency.cumulative(), sum_value=latency.sum_ms / 1000)
    yield histogram
    held = GaugeMetricFamily(f"{prefix}_locks_held", "Resources this process holds now")
    held.add_metric([], len(lock.held))
    yield held
