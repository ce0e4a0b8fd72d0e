"""Each benchmark's figure, drawn from seeded synthetic results: a whole PNG of some size."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks import (
    edge_hit_figure,
    failover,
    freshness,
    llm_overhead,
    origin_latency,
    sync_propagation,
)

RNG = random.Random(3)


def samples(n: int, low: float, high: float) -> list[float]:
    return [RNG.uniform(low, high) for _ in range(n)]


def probes(n: int) -> list[freshness.Probe]:
    edges = [[r + RNG.uniform(1, 9), r + RNG.uniform(1, 9)] for r in samples(n, 30, 90)]
    return [freshness.Probe(RNG.uniform(5, 20), min(e) - 5, 1, e, True) for e in edges]


DRAWINGS: dict[str, Callable[[Path], None]] = {
    "sync_propagation": lambda path: sync_propagation.plot(
        path,
        samples(500, 0.5, 6),
        samples(500, 0.4, 5),
        [
            {"rate": rate, "backlog_mean_second_half": rate // 10}
            for rate in sync_propagation.STEP_RATES[:4]
        ],
    ),
    "origin_latency": lambda path: origin_latency.plot(
        path, {"10k": (samples(300, 2, 9), samples(300, 1, 7))}
    ),
    "llm_overhead": lambda path: llm_overhead.plot(
        path, {"fake model server": samples(200, 1, 4), "direct": samples(200, 0.2, 0.9)}
    ),
    "freshness": lambda path: freshness.plot(path, probes(100)),
    "edge_hit": lambda path: edge_hit_figure.plot(
        path,
        {
            label: edge_hit_figure.TargetFigures(
                *samples(1, 2000, 9000), *sorted(samples(4, 1, 20))
            )
            for label in ("raw ASGI", "edge", "personal", "FastAPI")
        },
        32,
    ),
    "failover": lambda path: failover.plot(
        path,
        [(float(t), RNG.uniform(5, 400)) for t in range(60)],
        {"redis-primary": (10.0, 12.5, 25.0), "origin-0": (25.0, 26.0, 40.0)},
    ),
}


@pytest.mark.parametrize("name", sorted(DRAWINGS))
def test_each_benchmark_draws_its_figure(tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    DRAWINGS[name](path)
    png = path.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(png) > 10_000
