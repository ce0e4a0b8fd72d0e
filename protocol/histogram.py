"""A latency histogram kept as plain numbers, read by a Prometheus collector at scrape time.

Observing costs a short loop over the bucket bounds and no allocation, so hot paths (the
edge's sync applier, lock acquisitions) can record every event; the collector turns the
counts into the cumulative ``le`` buckets Prometheus expects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Upper bounds (ms) of the buckets: 1 ms to 5 s.
LATENCY_BUCKETS_MS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 5000.0)


@dataclass
class LatencyHistogram:
    """Cumulative-bucket histogram in the Prometheus way, kept as plain numbers."""

    bounds_ms: tuple[float, ...] = LATENCY_BUCKETS_MS
    counts: list[int] = field(default_factory=list)
    total: int = 0
    sum_ms: float = 0.0

    def __post_init__(self) -> None:
        if list(self.bounds_ms) != sorted(set(self.bounds_ms)):
            raise ValueError("bucket bounds must be strictly increasing")
        if not self.counts:
            self.counts = [0] * (len(self.bounds_ms) + 1)

    def observe(self, ms: float) -> None:
        for i, bound in enumerate(self.bounds_ms):
            if ms <= bound:
                self.counts[i] += 1
                break
        else:
            self.counts[-1] += 1
        self.total += 1
        self.sum_ms += ms

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, count)`` pairs with ``le`` in seconds, ``+Inf`` last."""
        out, running = [], 0
        for bound, count in zip((*self.bounds_ms, float("inf")), self.counts, strict=True):
            running += count
            out.append(("+Inf" if bound == float("inf") else repr(bound / 1000), running))
        return out
