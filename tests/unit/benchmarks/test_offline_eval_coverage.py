"""``benchmarks.offline_eval.covers``: an interval agrees with an online truth measured with
its own standard error, and ``summary`` judges each estimator against the targets."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.offline_eval import JUDGED, LIVE, SHIPPED, covers, summary
from config.settings import Settings


@pytest.mark.parametrize(
    ("estimate", "truth", "se", "expected"),
    [
        # No uncertainty in the truth: the plain test of the point.
        ((0.40, 0.36, 0.44), 0.40, 0.0, True),
        ((0.40, 0.36, 0.44), 0.44, 0.0, True),
        ((0.40, 0.36, 0.44), 0.45, 0.0, False),
        ((0.40, 0.36, 0.44), 0.35, 0.0, False),
        # The truth's own 95% half-width (1.96 x 0.01) added in quadrature to each side:
        # above, 0.04 and 0.0196 make 0.0445; below, the same.
        ((0.40, 0.36, 0.44), 0.444, 0.01, True),
        ((0.40, 0.36, 0.44), 0.446, 0.01, False),
        ((0.40, 0.36, 0.44), 0.356, 0.01, True),
        ((0.40, 0.36, 0.44), 0.354, 0.01, False),
        # An asymmetric interval keeps its sides: narrow below, wide above.
        ((0.40, 0.39, 0.50), 0.375, 0.005, False),
        ((0.40, 0.39, 0.50), 0.387, 0.005, True),
        ((0.40, 0.39, 0.50), 0.50, 0.005, True),
        # A point interval still agrees with a truth inside the truth's own margin.
        ((0.40, 0.40, 0.40), 0.41, 0.01, True),
        ((0.40, 0.40, 0.40), 0.42, 0.01, False),
    ],
)
def test_covers(
    estimate: tuple[float, float, float], truth: float, se: float, expected: bool
) -> None:
    assert covers(*estimate, truth, se) is expected


def _candidate(errors: dict[str, tuple[float, bool]]) -> dict[str, Any]:
    return {
        "estimates": {
            name: {"relative_error": error, "covers": covered, "covers_point": False}
            for name, (error, covered) in errors.items()
        }
    }


def test_summary_judges_each_estimator() -> None:
    good = (0.05, True)
    seeds = [
        {
            "candidates": [
                _candidate({"ips": good, "snips": (0.12, True), "dr": good, "dm": (0.01, False)}),
                _candidate({"ips": good, "snips": good, "dr": (0.05, False), "dm": good}),
            ]
        }
    ]
    figures = summary(seeds)
    assert figures["ips"] == {
        "mare": 0.05,
        "coverage": 1.0,
        "coverage_of_point": 0.0,
        "intervals": 2,
        "target_met": True,
    }
    assert figures["snips"]["mare"] == pytest.approx(0.085)
    assert figures["snips"]["target_met"] is True
    assert figures["dr"]["coverage"] == 0.5
    assert figures["dr"]["target_met"] is False
    assert set(JUDGED) == {"ips", "snips", "dr"}


def test_the_live_policy_is_the_shipped_one() -> None:
    assert LIVE.config == SHIPPED.config
    assert LIVE.config.exploration_weight == Settings().exploration_weight
