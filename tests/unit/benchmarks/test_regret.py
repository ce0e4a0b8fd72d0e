from __future__ import annotations

import numpy as np
import pytest

from benchmarks.regret import (
    Trace,
    best_of,
    figures,
    prefix_regret_pct,
    ratio,
    regret_pct,
    window_bounds,
)


@pytest.mark.parametrize(
    ("total", "windows", "expected"),
    [
        (20, 10, [(2 * w, 2 * w + 2) for w in range(10)]),
        (10, 10, [(w, w + 1) for w in range(10)]),
        (7, 2, [(0, 4), (4, 7)]),
        (9, 3, [(0, 3), (3, 6), (6, 9)]),
    ],
)
def test_windows_cover_the_run(total: int, windows: int, expected: list[tuple[int, int]]) -> None:
    assert window_bounds(total, windows) == expected


@pytest.mark.parametrize(("total", "windows"), [(5, 10), (10, 0)])
def test_impossible_windows_are_refused(total: int, windows: int) -> None:
    with pytest.raises(ValueError, match="windows"):
        window_bounds(total, windows)


@pytest.mark.parametrize(
    ("regret", "oracle", "expected"),
    [
        ([0.5, 0.5], [1.0, 1.0], 50.0),
        # A ratio of sums: the big slate's regret weighs more than the small one's.
        ([1.0, 0.0], [2.0, 0.5], 40.0),
        ([0.0, 0.0], [1.0, 1.0], 0.0),
        ([], [], None),
    ],
)
def test_regret_pct_is_a_ratio_of_sums(
    regret: list[float], oracle: list[float], expected: float | None
) -> None:
    assert regret_pct(np.array(regret), np.array(oracle)) == expected


def trace(regret: list[float], oracle: float = 2.0, clicks: float = 1.0) -> Trace:
    n = len(regret)
    return Trace(np.array(regret), np.full(n, oracle), np.full(n, clicks), seconds=1.23)


def test_figures_of_a_full_run() -> None:
    got = figures(trace([1.0] * 10 + [0.5] * 10), total=20, windows=4)
    assert got.regret_pct_by_window == [50.0, 50.0, 25.0, 25.0]
    assert got.final_regret_pct == 25.0
    assert got.final_window == 4
    assert got.cum_regret_pct == 37.5
    assert got.clicks_per_slate == 1.0
    assert got.expected_clicks_per_slate == 1.25
    assert got.oracle_clicks_per_slate == 2.0
    assert got.slates == 20


def test_a_run_cut_short_reports_only_the_windows_it_covered() -> None:
    got = figures(trace([1.0] * 10 + [0.5] * 3), total=20, windows=4)
    assert got.regret_pct_by_window == [50.0, 50.0, None, None]
    assert got.final_regret_pct == 50.0
    assert got.final_window == 2
    assert got.cum_regret_pct == pytest.approx(100 * 11.5 / 26, abs=0.01)
    assert got.slates == 13


def test_prefix_regret_compares_runs_at_the_shorter_ones_end() -> None:
    full = trace([1.0] * 10 + [0.0] * 10)
    assert prefix_regret_pct(full, 10) == 50.0
    assert prefix_regret_pct(full, 20) == 25.0
    assert prefix_regret_pct(trace([1.0] * 5), 10) is None


@pytest.mark.parametrize(
    ("value", "best", "expected"),
    [(30.0, 40.0, 0.75), (40.0, 40.0, 1.0), (None, 40.0, None), (30.0, None, None), (1, 0, None)],
)
def test_ratio(value: float | None, best: float | None, expected: float | None) -> None:
    assert ratio(value, best) == expected


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"a": 50.0, "b": 40.0, "c": None}, ("b", 40.0)),
        ({"a": None}, None),
        ({}, None),
    ],
)
def test_best_of_skips_missing(
    values: dict[str, float | None], expected: tuple[str, float] | None
) -> None:
    assert best_of(values) == expected
