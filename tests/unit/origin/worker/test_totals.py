from __future__ import annotations

from collections import Counter

import pytest

from origin.worker.batch import Outcome, WorkerStats
from origin.worker.totals import TOTALLED, all_workers, run_counters


def test_run_counters_are_the_totalled_counters_of_a_run() -> None:
    stats = WorkerStats(
        outcomes=Counter({Outcome.APPLIED: 7, Outcome.DUPLICATE: 2, Outcome.NO_CHANGE: 1}),
        batches=3,
        entries=10,
        conflicts=1,
        reclaimed=4,
        trimmed=5,
        retention_spared=2,
        freshness_ms=[12.0],  # a distribution, not a count: not totalled
    )
    counters = run_counters(stats)
    assert tuple(counters) == TOTALLED
    assert counters == {
        "batches": 3,
        "entries": 10,
        "applied": 7,
        "duplicates": 2,
        "conflicts": 1,
        "reclaimed": 4,
        "trimmed": 5,
        "retention_spared": 2,
    }


@pytest.mark.parametrize(
    ("totals", "applied", "batches"),
    [
        ({}, 0, 0),
        ({"w-0": {"applied": 6145, "batches": 70}}, 6145, 70),
        ({"w-0": {"applied": 3, "batches": 1}, "w-1": {"applied": 4}}, 7, 1),  # a missing field
    ],
)
def test_all_workers_sums_every_consumer_name(
    totals: dict[str, dict[str, int]], applied: int, batches: int
) -> None:
    summed = all_workers(totals)
    assert tuple(summed) == TOTALLED
    assert (summed["applied"], summed["batches"], summed["trimmed"]) == (applied, batches, 0)
