"""Regret accounting of ``benchmarks.learning``: per-slate figures into per-window ones.

Regret% of a stretch of slates = sum of regret / sum of the oracle's expected clicks over
the same slates (not a mean of per-slate ratios, which would weigh a casual user's slate
like a power user's whatever either could earn). Windows are tenths of the full run, the
same for every policy: a policy run for fewer slates (Vowpal Wabbit's bounded default)
has figures only for the windows it covered completely, so that every number on the x-axis
compares the same requests.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from benchmarks.click_model import Vector

# A run is reported in tenths.
WINDOWS = 10


@dataclass(frozen=True, slots=True)
class Trace:
    """A policy's run, one entry per slate served, in request order."""

    regret: Vector  # the oracle's expected clicks minus the slate's
    oracle: Vector  # the oracle's expected clicks for that request
    clicks: Vector  # clicks sampled (what the policy was told)
    seconds: float


@dataclass(frozen=True, slots=True)
class Figures:
    slates: int
    final_regret_pct: float | None  # the last window the policy covered
    final_window: int | None  # which window that is, 1-based
    cum_regret_pct: float | None
    regret_pct_by_window: list[float | None]
    clicks_per_slate: float | None
    expected_clicks_per_slate: float | None
    oracle_clicks_per_slate: float | None
    seconds: float


def window_bounds(total: int, windows: int) -> list[tuple[int, int]]:
    """``windows`` consecutive [start, end) ranges covering ``total`` slates, as equal as
    integers allow."""
    if total < windows or windows < 1:
        raise ValueError(f"{total} slates cannot make {windows} windows")
    edges = [round(total * w / windows) for w in range(windows + 1)]
    return list(itertools.pairwise(edges))


def regret_pct(regret: Vector, oracle: Vector) -> float | None:
    total = float(oracle.sum())
    return None if total <= 0 else round(100.0 * float(regret.sum()) / total, 2)


def figures(trace: Trace, total: int, windows: int) -> Figures:
    """A policy's figures over the run's windows; windows it did not cover are None."""
    served = len(trace.regret)
    by_window = [
        regret_pct(trace.regret[start:end], trace.oracle[start:end]) if end <= served else None
        for start, end in window_bounds(total, windows)
    ]
    covered = [n for n, value in enumerate(by_window) if value is not None]
    final = covered[-1] if covered else None
    per_slate = served or 1
    return Figures(
        slates=served,
        final_regret_pct=by_window[final] if final is not None else None,
        final_window=final + 1 if final is not None else None,
        cum_regret_pct=regret_pct(trace.regret, trace.oracle),
        regret_pct_by_window=by_window,
        clicks_per_slate=round(float(trace.clicks.sum()) / per_slate, 4) if served else None,
        expected_clicks_per_slate=(
            round(float((trace.oracle - trace.regret).sum()) / per_slate, 4) if served else None
        ),
        oracle_clicks_per_slate=round(float(trace.oracle.sum()) / per_slate, 4) if served else None,
        seconds=round(trace.seconds, 1),
    )


def prefix_regret_pct(trace: Trace, slates: int) -> float | None:
    """Cumulative regret% over the first ``slates`` slates: the figure comparable with a
    policy that ran only that far."""
    if len(trace.regret) < slates:
        return None
    return regret_pct(trace.regret[:slates], trace.oracle[:slates])


def ratio(value: float | None, best: float | None) -> float | None:
    """value / best, rounded; None when either is missing or best is zero."""
    if value is None or best is None or best == 0:
        return None
    return round(value / best, 3)


def best_of(values: dict[str, float | None]) -> tuple[str, float] | None:
    """The lowest figure and whose it is, among those present."""
    present = {name: v for name, v in values.items() if v is not None}
    if not present:
        return None
    name = min(present, key=lambda n: present[n])
    return name, present[name]
