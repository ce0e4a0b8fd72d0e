"""perso.demo_series: the demo's requests in buckets of seconds, per region."""

from __future__ import annotations

import pytest

from perso.demo_series import (
    ALL,
    MAX_BUCKETS,
    Observation,
    bucket_width,
    bucketed,
    percentile,
    reach,
    summarize,
)


def hit(t_s: float, region: str = "us-east", user: str = "u1", **kw: object) -> Observation:
    return Observation(t_s, region, user, True, **kw)  # type: ignore[arg-type]


def failed(t_s: float, region: str = "us-east") -> Observation:
    return Observation(t_s, region, "u1", False)


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(0.0, 1.0), (4.0, 1.0), (60.0, 1.0), (60.5, 2.0), (120.0, 2.0), (600.0, 10.0)],
)
def test_bucket_width_keeps_the_axis_to_max_buckets(seconds: float, expected: float) -> None:
    assert bucket_width(seconds) == expected
    assert seconds / bucket_width(seconds) <= MAX_BUCKETS


@pytest.mark.parametrize(
    ("values", "pct", "expected"),
    [
        ([], 50, None),
        ([3.0], 99, 3.0),
        ([4.0, 1.0, 3.0, 2.0], 50, 2.0),
        ([4.0, 1.0, 3.0, 2.0], 99, 4.0),
        ([float(v) for v in range(1, 101)], 99, 99.0),
    ],
)
def test_percentile_is_nearest_rank(values: list[float], pct: float, expected: float) -> None:
    assert percentile(values, pct) == expected


@pytest.mark.parametrize(
    ("observations", "field", "expected"),
    [
        ([], "hit_ratio", None),
        ([failed(0)], "hit_ratio", None),
        ([failed(0)], "errors", 1),
        ([hit(0, hit=True), hit(0), failed(0)], "hit_ratio", 0.5),
        ([hit(0, hit=True), hit(0), failed(0)], "requests", 3),
        ([hit(0, personalized=True), hit(0), hit(0), hit(0)], "personalized", 0.25),
        ([hit(0, engaged=True), hit(0, engaged=True), hit(0)], "engagement", 2 / 3),
        ([hit(0, client_ms=2.0), hit(0, client_ms=9.0)], "client_p50_ms", 2.0),
        ([hit(0, client_ms=2.0), hit(0, client_ms=9.0)], "client_p99_ms", 9.0),
        ([hit(0, edge_ms=0.3), hit(0, edge_ms=40.0), hit(0)], "edge_p99_ms", 40.0),
    ],
)
def test_summarize(observations: list[Observation], field: str, expected: object) -> None:
    assert getattr(summarize(0.0, observations), field) == expected


@pytest.mark.parametrize(
    ("times", "width", "seconds", "expected_counts"),
    [
        ([0.1, 0.9, 1.2], 1.0, 3.0, [2, 1, 0]),
        ([0.0, 2.0, 4.0], 2.0, 6.0, [1, 1, 1]),
        # past the end (the last request answered after the deadline): in the last bucket
        ([0.5, 3.7], 1.0, 3.0, [1, 0, 1]),
        ([], 1.0, 2.5, [0, 0, 0]),
    ],
)
def test_bucketed_counts_requests_per_bucket(
    times: list[float], width: float, seconds: float, expected_counts: list[int]
) -> None:
    buckets = bucketed([hit(t) for t in times], width, seconds)
    assert [b.requests for b in buckets[ALL]] == expected_counts
    assert [b.start_s for b in buckets[ALL]] == [i * width for i in range(len(expected_counts))]


def test_bucketed_splits_regions_and_adds_them_up() -> None:
    observations = [
        hit(0.2, "us-east", hit=True),
        hit(0.4, "eu-west"),
        hit(1.5, "eu-west", hit=True),
        failed(1.6, "us-east"),
    ]
    buckets = bucketed(observations, 1.0, 2.0)
    assert list(buckets) == ["us-east", "eu-west", ALL]
    assert [b.hit_ratio for b in buckets["us-east"]] == [1.0, None]
    assert [b.hit_ratio for b in buckets["eu-west"]] == [0.0, 1.0]
    assert [b.hit_ratio for b in buckets[ALL]] == [0.5, 1.0]
    assert [b.errors for b in buckets[ALL]] == [0, 1]


def test_bucketed_refuses_a_width_of_zero() -> None:
    with pytest.raises(ValueError, match="width"):
        bucketed([], 0.0, 1.0)


@pytest.mark.parametrize(
    ("observations", "expected"),
    [
        ([], [0, 0, 0]),
        ([hit(0.5, user="a")], [0, 0, 0]),
        ([hit(0.5, user="a", personalized=True)], [1, 1, 1]),
        # a shopper counts once, from their first personalised answer, in any order
        (
            [
                hit(2.5, user="a", personalized=True),
                hit(1.5, user="a", personalized=True),
                hit(2.1, user="b", personalized=True),
            ],
            [0, 1, 2],
        ),
        ([Observation(0.5, "us-east", "a", False, personalized=True)], [0, 0, 0]),
    ],
)
def test_reach_counts_distinct_shoppers_by_each_bucket_end(
    observations: list[Observation], expected: list[int]
) -> None:
    assert reach(observations, 1.0, 3.0) == expected
