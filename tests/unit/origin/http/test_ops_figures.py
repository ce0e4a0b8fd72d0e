"""The operations page's arithmetic (``origin.http.ops_figures``), by tables."""

from __future__ import annotations

import math
from collections import deque

import pytest

from origin.http import ops_figures as f

INF = math.inf


def exposition(answers: dict[str, float], buckets: dict[str, int] | None = None) -> str:
    """An edge's /metrics body with the given answers by ``served`` and latency buckets."""
    lines = ["# TYPE perso_edge_answers counter"]
    lines += [
        f'perso_edge_answers_total{{region="r",served="{s}"}} {v}' for s, v in answers.items()
    ]
    if buckets is not None:
        lines.append("# TYPE perso_edge_personalize_seconds histogram")
        for le, count in buckets.items():
            lines.append(f'perso_edge_personalize_seconds_bucket{{region="r",le="{le}"}} {count}')
        lines.append(f'perso_edge_personalize_seconds_count{{region="r"}} {count}')
        lines.append('perso_edge_personalize_seconds_sum{region="r"} 0.0')
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("previous", "current", "expected"),
    [
        (10.0, 15.0, 5.0),  # grew
        (10.0, 10.0, 0.0),  # idle
        (10.0, 3.0, 3.0),  # reset by a restart: what it counted since
        (None, 3.0, None),  # first scrape
        (3.0, None, None),  # the series is gone
    ],
)
def test_increase(previous: float | None, current: float | None, expected: float | None) -> None:
    assert f.increase(previous, current) == expected


@pytest.mark.parametrize(
    ("q", "cumulative", "expected"),
    [
        (0.5, {0.001: 0, 0.002: 10, INF: 10}, 0.0015),  # midway in (1 ms, 2 ms]
        (0.5, {0.001: 10, 0.002: 10, INF: 10}, 0.0005),  # first bucket: from 0
        (0.99, {0.001: 50, 0.01: 100, INF: 100}, 0.001 + 0.009 * (99 - 50) / 50),
        (0.99, {0.001: 50, 0.005: 90, INF: 100}, 0.005),  # in +Inf: the last finite bound
        (0.5, {0.001: 0, INF: 0}, None),  # nothing observed
        (0.5, {}, None),  # no histogram
    ],
)
def test_quantile(q: float, cumulative: dict[float, float], expected: float | None) -> None:
    found = f.quantile(q, cumulative)
    assert found == (None if expected is None else pytest.approx(expected))


@pytest.mark.parametrize(
    ("previous", "current", "expected"),
    [
        ({0.1: 5, INF: 6}, {0.1: 8, INF: 10}, {0.1: 3, INF: 4}),
        ({}, {0.1: 8, INF: 10}, {0.1: 8, INF: 10}),  # first: all of it
        ({0.1: 5, INF: 6}, {0.1: 1, INF: 2}, {0.1: 1, INF: 2}),  # reset
    ],
)
def test_bucket_growth(
    previous: dict[float, float], current: dict[float, float], expected: dict[float, float]
) -> None:
    assert f.bucket_growth(previous, current) == expected


# (requests/s, share without an origin call, stale/s, fallback/s)
Served = tuple[float, float | None, float | None, float | None]


@pytest.mark.parametrize(
    ("before", "after", "seconds", "expected"),
    [
        # 100 answers in 2 s, 20 of them misses (an origin call): 80 % without one.
        (
            {"hit": 0, "miss": 0, "stale": 0, "popular": 0},
            {"hit": 70, "miss": 20, "stale": 6, "popular": 4},
            2.0,
            (50.0, 0.8, 3.0, 2.0),
        ),
        # idle: no rate of nothing, no share of nothing
        ({"hit": 5, "miss": 5}, {"hit": 5, "miss": 5}, 1.0, (0.0, None, None, None)),
        # the edge restarted: its counts since are the growth
        ({"hit": 500, "miss": 100}, {"hit": 9, "miss": 1}, 1.0, (10.0, 0.9, None, None)),
    ],
)
def test_edge_served(
    before: dict[str, float],
    after: dict[str, float],
    seconds: float,
    expected: Served,
) -> None:
    previous = f.parse(exposition(before), 10.0)
    current = f.parse(exposition(after), 10.0 + seconds)
    figures = f.served([f.edge_growth(previous, current)])
    # a series absent from both scrapes is unknown (None), not 0
    names = ("requests_per_s", "no_origin_share", "stale_per_s", "fallback_per_s")
    assert tuple(figures[n] for n in names) == expected


def test_first_scrape_has_no_rates() -> None:
    current = f.parse(exposition({"hit": 10, "miss": 1}), 5.0)
    figures = f.edge_figures(None, current)
    assert figures["requests_per_s"] is None
    assert figures["p99_ms"] is None
    assert figures["stale_total"] is None  # no such series at all


def test_region_sums_its_processes_before_dividing() -> None:
    """Two processes: 90 answers with 0 misses and 10 with 10 misses are 90 % without an
    origin call together (not the mean of 100 % and 0 %), and their latency buckets add."""
    a0 = f.parse(exposition({"hit": 0, "miss": 0}, {"0.001": 0, "0.01": 0, "+Inf": 0}), 0.0)
    a1 = f.parse(exposition({"hit": 90, "miss": 0}, {"0.001": 90, "0.01": 90, "+Inf": 90}), 1.0)
    b0 = f.parse(exposition({"hit": 0, "miss": 0}, {"0.001": 0, "0.01": 0, "+Inf": 0}), 0.0)
    b1 = f.parse(exposition({"hit": 0, "miss": 10}, {"0.001": 0, "0.01": 10, "+Inf": 10}), 1.0)
    together = f.served([f.edge_growth(a0, a1), f.edge_growth(b0, b1)])
    assert together["requests_per_s"] == 100.0
    assert together["no_origin_share"] == 0.9
    assert together["p50_ms"] == pytest.approx(0.6)  # rank 50 of 90 in (0, 1 ms]
    assert together["p99_ms"] == pytest.approx(1.0 + 9.0 * 9 / 10)  # rank 99: 9th of 10


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ({"closed": 1, "open": 0, "half_open": 0}, "closed"),
        ({"closed": 0, "open": 1, "half_open": 0}, "open"),
        ({}, None),
    ],
)
def test_breaker_state(states: dict[str, int], expected: str | None) -> None:
    body = "# TYPE perso_edge_origin_circuit_state gauge\n" + "".join(
        f'perso_edge_origin_circuit_state{{region="r",state="{s}"}} {v}\n'
        for s, v in states.items()
    )
    assert f.breaker_state(f.parse(body, 0.0)) == expected


def test_workers_rates_per_consumer_and_backlog() -> None:
    def body(w0: int, w1: int) -> str:
        return (
            "# TYPE perso_worker_entries counter\n"
            f'perso_worker_entries_total{{consumer="w0"}} {w0}\n'
            f'perso_worker_entries_total{{consumer="w1"}} {w1}\n'
            "# TYPE perso_worker_backlog gauge\n"
            'perso_worker_backlog{partition="0"} 3\n'
            'perso_worker_backlog{partition="1"} 4\n'
            "# TYPE perso_worker_freshness_p99_seconds gauge\n"
            'perso_worker_freshness_p99_seconds{consumer="w0"} 0.25\n'
        )

    figures = f.worker_figures(f.parse(body(100, 50), 0.0), f.parse(body(140, 50), 2.0))
    assert figures["events_per_s"] == 20.0
    assert figures["backlog"] == 7.0
    assert figures["freshness_p99_ms"] == 250.0
    assert [(c["consumer"], c["events_per_s"], c["running"]) for c in figures["consumers"]] == [
        ("w0", 20.0, True),
        ("w1", 0.0, False),  # stopped: its totals stay, no freshness
    ]


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        ([(2, 10, 3), (1, 4, 0)], [(60_000, 0.0), (120_000, 0.3)]),  # oldest first
        ([(1, 0, 0)], []),  # a minute without slates is no point
        ([], []),
    ],
)
def test_curve(points: list[tuple[int, int, int]], expected: list[tuple[int, float]]) -> None:
    assert [(p["minute_ms"], p["clicks_per_slate"]) for p in f.curve(points)] == expected


def test_not_an_exposition_is_refused() -> None:
    with pytest.raises(ValueError, match="invalid metric name"):
        f.parse("<html>not metrics</html>\n", 0.0)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # no model server: the tier says so; nothing was called, nothing spent
        (
            "# TYPE perso_origin_llm_enabled gauge\nperso_origin_llm_enabled 0.0\n",
            (False, None, 0.0, None),
        ),
        # a model server, no call yet: zeros, not unknowns
        (
            "# TYPE perso_origin_llm_enabled gauge\nperso_origin_llm_enabled 1.0\n",
            (True, 0.0, 0.0, 0.0),
        ),
        (
            "# TYPE perso_origin_llm_enabled gauge\nperso_origin_llm_enabled 1.0\n"
            "# TYPE perso_origin_llm_calls counter\n"
            'perso_origin_llm_calls_total{outcome="ok"} 7\n'
            'perso_origin_llm_calls_total{outcome="timeout"} 2\n'
            "# TYPE perso_origin_llm_fallbacks counter\n"
            'perso_origin_llm_fallbacks_total{reason="timeout"} 2\n'
            "# TYPE perso_origin_llm_cost_usd counter\n"
            "perso_origin_llm_cost_usd_total 0.0123\n",
            (True, 9.0, 2.0, 0.0123),
        ),
        ("", (None, None, None, None)),  # an origin of another release: unknown
    ],
)
def test_llm_tier(body: str, expected: tuple[object, ...]) -> None:
    figures = f.origin_figures(None, f.parse(body, 0.0))
    names = ("llm_enabled", "llm_calls", "llm_fallbacks", "llm_spend_usd")
    assert tuple(figures[n] for n in names) == expected


def test_the_last_evaluation_from_its_gauges() -> None:
    body = (
        "# TYPE perso_evaluation_last_timestamp_seconds gauge\n"
        "perso_evaluation_last_timestamp_seconds 1795000000.5\n"
        "# TYPE perso_evaluation_last_joined gauge\n"
        "perso_evaluation_last_joined 480\n"
        "# TYPE perso_evaluation_last_live_engagement gauge\n"
        'perso_evaluation_last_live_engagement{policy="configured/1"} 0.21\n'
        "# TYPE perso_evaluation_last_engagement gauge\n"
        'perso_evaluation_last_engagement{policy="b",estimator="snips"} 0.3\n'
        'perso_evaluation_last_engagement{policy="a",estimator="snips"} 0.1\n'
        "# TYPE perso_evaluation_last_engagement_low gauge\n"
        'perso_evaluation_last_engagement_low{policy="a",estimator="snips"} 0.05\n'
        'perso_evaluation_last_engagement_low{policy="b",estimator="snips"} 0.2\n'
        "# TYPE perso_evaluation_last_engagement_high gauge\n"
        'perso_evaluation_last_engagement_high{policy="a",estimator="snips"} 0.15\n'
        'perso_evaluation_last_engagement_high{policy="b",estimator="snips"} 0.4\n'
    )
    last = f.last_evaluation(f.parse(body, 0.0))
    assert last == {
        "at_ms": 1_795_000_000_500,
        "joined": 480.0,
        "live": "configured/1",
        "live_engagement": 0.21,
        "estimates": [
            {"policy": "a", "estimator": "snips", "value": 0.1, "low": 0.05, "high": 0.15},
            {"policy": "b", "estimator": "snips", "value": 0.3, "low": 0.2, "high": 0.4},
        ],
    }
    assert f.last_evaluation(f.parse("", 0.0)) is None  # none run yet


@pytest.mark.parametrize(
    ("times", "expected"),
    [
        ([0.0], None),  # the very first scrape: nothing to compare with
        ([0.0, 2.0], 0.0),  # none 15 s old yet: the oldest
        ([0.0, 2.0, 14.0, 16.0], 0.0),  # 16 s: the scrape at 0 is the newest 15 s old
        ([0.0, 2.0, 14.0, 16.0, 18.0], 2.0),  # then the one at 2
        ([0.0, 2.0, 14.0, 16.0, 18.0, 31.0], 16.0),  # several pass at once
    ],
)
def test_baseline(times: list[float], expected: float | None) -> None:
    kept: deque[f.Sample] = deque()
    found = None
    for at in times:
        found = f.baseline(kept, f.Sample(at), 15.0)
    assert (None if found is None else found.at_s) == expected
    assert kept[-1].at_s == times[-1]
