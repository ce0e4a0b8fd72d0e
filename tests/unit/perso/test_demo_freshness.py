"""perso.demo_freshness: the edges' publish-to-applied histograms, parsed and read."""

from __future__ import annotations

import math

import pytest

from perso.demo_freshness import (
    Histogram,
    Scrape,
    difference,
    parse,
    per_interval,
    quantile,
    total,
)
from protocol.histogram import LatencyHistogram

INF = math.inf


def exposition(region: str, observed_ms: list[float]) -> str:
    """The text an edge's /metrics carries for the histogram, built from its own class."""
    histogram = LatencyHistogram()
    for ms in observed_ms:
        histogram.observe(ms)
    name = "perso_edge_sync_publish_to_applied_seconds"
    lines = [f"# HELP {name} Publish to applied", f"# TYPE {name} histogram"]
    lines += [
        f'{name}_bucket{{le="{le}",region="{region}"}} {count}.0'
        for le, count in histogram.cumulative()
    ]
    lines += [
        f'{name}_count{{region="{region}"}} {histogram.total}.0',
        f'{name}_sum{{region="{region}"}} {histogram.sum_ms / 1000}',
    ]
    return "\n".join(lines) + "\n"


def test_parse_reads_each_regions_buckets() -> None:
    text = exposition("us-east", [0.5, 3.0, 3.0, 700.0]) + exposition("eu-west", [12.0])
    parsed = parse(text)
    assert set(parsed) == {"us-east", "eu-west"}
    assert parsed["us-east"][0] == (0.001, 1.0)
    assert parsed["us-east"][-1] == (INF, 4.0)
    assert total(parsed["eu-west"]) == 1.0


def test_parse_ignores_other_metrics() -> None:
    assert parse("# TYPE other counter\nother_total 3.0\n") == {}


@pytest.mark.parametrize(
    ("later", "earlier", "expected"),
    [
        ([(0.001, 2.0), (INF, 5.0)], None, [(0.001, 2.0), (INF, 5.0)]),
        ([(0.001, 2.0), (INF, 5.0)], [], [(0.001, 2.0), (INF, 5.0)]),
        ([(0.001, 2.0), (INF, 5.0)], [(0.001, 1.0), (INF, 1.0)], [(0.001, 1.0), (INF, 4.0)]),
    ],
)
def test_difference(later: Histogram, earlier: Histogram | None, expected: Histogram) -> None:
    assert difference(later, earlier) == expected


@pytest.mark.parametrize(
    ("histogram", "q", "expected"),
    [
        ([], 0.5, None),
        ([(0.001, 0.0), (INF, 0.0)], 0.5, None),
        # all in the first bucket: linear from 0 to its bound
        ([(0.01, 4.0), (INF, 4.0)], 0.5, 0.005),
        # half below 10 ms, half in (10, 20]: the median is 10 ms, p75 is 15 ms
        ([(0.01, 2.0), (0.02, 4.0), (INF, 4.0)], 0.5, 0.01),
        ([(0.01, 2.0), (0.02, 4.0), (INF, 4.0)], 0.75, 0.015),
        # past the last finite bound: that bound
        ([(0.01, 1.0), (INF, 4.0)], 0.99, 0.01),
    ],
)
def test_quantile_interpolates_like_prometheus(
    histogram: Histogram, q: float, expected: float | None
) -> None:
    got = quantile(histogram, q)
    assert got == pytest.approx(expected) if expected is not None else got is None


def test_per_interval_reads_what_each_interval_observed() -> None:
    first = parse(exposition("us-east", [1.5] * 10))["us-east"]
    second = parse(exposition("us-east", [1.5] * 10 + [150.0] * 10))["us-east"]
    scrapes = [Scrape(0.0, {"us-east": first}), Scrape(2.0, {"us-east": second}), Scrape(4.0, {})]
    points = per_interval(scrapes, "us-east", 0.5)
    assert [t for t, _ in points] == [0.0, 2.0]
    # the first interval is everything before it (1-2 ms); the second only the slow ones
    assert 0.001 <= (points[0][1] or 0) <= 0.002
    assert 0.1 <= (points[1][1] or 0) <= 0.2
