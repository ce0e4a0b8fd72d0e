from __future__ import annotations

import pytest

from origin.worker.batch import WorkerStats
from origin.worker.figures import figures_of


@pytest.mark.parametrize(
    ("samples", "p50", "p99"),
    [([], 0.0, 0.0), ([7.0], 7.0, 7.0), ([float(k) for k in range(100, 0, -1)], 51.0, 100.0)],
    ids=["none", "one", "hundred-unsorted"],
)
def test_figures_of_a_worker(samples: list[float], p50: float, p99: float) -> None:
    stats = WorkerStats(batches=4, entries=10, freshness_ms=samples)
    figures = figures_of(
        stats, {"batches": 4, "entries": 10}, trimmer=True, deferred=3, lag_ms=12, now_ms=99
    )
    assert figures == {
        "batches": 4,
        "entries": 10,
        "trimmer": 1,
        "deferred": 3,
        "mean_batch": 2.5,
        "freshness_p50_ms": p50,
        "freshness_p99_ms": p99,
        "lag_ms": 12,
        "updated_ms": 99,
    }


def test_a_worker_that_read_nothing_has_no_mean_batch() -> None:
    figures = figures_of(WorkerStats(), {}, trimmer=False, deferred=0, lag_ms=0, now_ms=0)
    assert (figures["mean_batch"], figures["trimmer"]) == (0.0, 0)
