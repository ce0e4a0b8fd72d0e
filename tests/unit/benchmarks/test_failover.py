"""benchmarks.failover: the p99 per interval its figure is drawn from."""

from __future__ import annotations

import pytest

from benchmarks.failover import p99_per_interval


@pytest.mark.parametrize(
    ("latencies", "every_s", "expected"),
    [
        ([], 1.0, []),
        ([(0.2, 5.0)], 1.0, [(0.0, 5.0)]),
        # an interval without requests is left out, not drawn as zero
        ([(0.2, 5.0), (0.7, 9.0), (2.5, 300.0)], 1.0, [(0.0, 9.0), (2.0, 300.0)]),
        ([(2.5, 1.0), (0.1, 2.0)], 2.0, [(0.0, 2.0), (2.0, 1.0)]),
        ([(0.0, float(ms)) for ms in range(1, 101)], 5.0, [(0.0, 99.0)]),
    ],
)
def test_p99_per_interval(
    latencies: list[tuple[float, float]], every_s: float, expected: list[tuple[float, float]]
) -> None:
    assert p99_per_interval(latencies, every_s) == expected
