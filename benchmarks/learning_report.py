"""What a learning run reports (``benchmarks.learning``): the tables, the JSON, the PNG.

The JSON keeps the product's figures at the top level (``final_regret_pct``,
``cum_regret_pct``, ``regret_pct_by_window``, ``ratio_vs_best_baseline``), filled from the
run of the policy named ``PRODUCT`` when there is one; its other configurations (the
freshness tiers on) are under ``product_variants``; every other policy is a baseline. The
best baseline is the one with the lowest regret in the last tenth among those that served
the whole run; the best cumulative one likewise by cumulative regret.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.learning_policies import PERSO as PRODUCT
from benchmarks.learning_policies import PRODUCT as PRODUCT_VARIANTS
from benchmarks.learning_run import PolicyRun
from benchmarks.regret import WINDOWS, best_of, prefix_regret_pct, ratio, window_bounds
from perso import plots
from perso.console import table

PRODUCT_NOT_RUN = "not measured: the product's policy was not in --policies"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def tables(runs: Sequence[PolicyRun], slates: int) -> str:
    """The summary table and the regret per tenth, as printed."""
    headers = ["policy", "slates", "final tenth", "cumulative", "clicks/slate"]
    headers += ["E[clicks]/slate", "time"]
    rows: list[list[object]] = []
    for run in runs:
        f = run.figures
        if f is None:
            rows.append([run.name, "-", "-", "-", "-", "-", "not run"])
            continue
        final = _pct(f.final_regret_pct)
        if f.final_window is not None and f.final_window != WINDOWS:
            final += f" (tenth {f.final_window})"
        rows.append(
            [run.name, f"{f.slates:,}", final, _pct(f.cum_regret_pct), _num(f.clicks_per_slate),
             _num(f.expected_clicks_per_slate), f"{f.seconds:.1f} s"]
        )  # fmt: skip
    windows = [
        [run.name, *(_pct(v) for v in run.figures.regret_pct_by_window)]
        for run in runs
        if run.figures is not None
    ]
    notes = [
        f"{r.name} served the first {r.figures.slates:,} slates: its figures cover those"
        for r in runs
        if r.figures is not None and r.figures.slates < slates
    ]
    notes += [f"{r.name}: {r.missing}" for r in runs if r.figures is None and r.missing]
    return "\n".join(
        [
            table(headers, rows),
            *notes,
            "",
            "regret % per tenth of the run:",
            table(["policy", *(str(w + 1) for w in range(WINDOWS))], windows),
        ]
    )


def plot(path: Path, runs: Sequence[PolicyRun], slates: int, references: dict[str, float]) -> None:
    """Regret% per window, one line per policy, the reference lines dashed."""
    middles = [(start + end) / 2 for start, end in window_bounds(slates, WINDOWS)]
    with plots.figure(
        path, "Learning in the simulated shop: regret against the oracle (%)", height=4.8
    ) as [ax]:
        for run in runs:
            if run.figures is not None:
                values = [math.nan if v is None else v for v in run.figures.regret_pct_by_window]
                ax.plot(middles, values, marker="o", label=run.name)
        for label, value in references.items():
            ax.axhline(value, linestyle="--", linewidth=1, color="grey")
            ax.annotate(label, (0, value), xytext=(2, 2), textcoords="offset points", fontsize=8)
        ax.set_xlim(0, slates)
        ax.set_ylim(0, 100)
        plots.labelled(
            ax,
            "",
            "slates served (window midpoints, tenths of the run)",
            "regret % in the window (vs the oracle's expected clicks)",
        )


def _entry(run: PolicyRun) -> dict[str, Any]:
    if run.figures is None:
        return {
            "final_regret_pct": None,
            "cum_regret_pct": None,
            "regret_pct_by_window": None,
            "clicks_per_slate": None,
            "missing": run.missing,
            "configuration": run.configuration,
        }
    return {**dataclasses.asdict(run.figures), "configuration": run.configuration}


def figures_json(runs: Sequence[PolicyRun], slates: int) -> dict[str, Any]:
    """The product's slots, the baselines, the best baseline and the ratio between them."""
    product = next((r for r in runs if r.name == PRODUCT), None)
    baselines = [r for r in runs if r.name not in PRODUCT_VARIANTS]
    variants = [r for r in runs if r.name in PRODUCT_VARIANTS and r.name != PRODUCT]
    whole = [r for r in baselines if r.figures is not None and r.figures.final_window == WINDOWS]
    best = best_of({r.name: r.figures.final_regret_pct for r in whole if r.figures})
    best_cum = best_of({r.name: r.figures.cum_regret_pct for r in whole if r.figures})
    mine = product.figures if product is not None else None
    # A run cut short (VW's --vw-slates): everyone's cumulative regret over its slates.
    cut = min((len(r.trace.regret) for r in runs if r.trace is not None), default=slates)
    at_cut = (
        {r.name: prefix_regret_pct(r.trace, cut) for r in runs if r.trace is not None}
        if cut < slates
        else None
    )
    return {
        "final_regret_pct": mine.final_regret_pct if mine else None,
        "cum_regret_pct": mine.cum_regret_pct if mine else None,
        "regret_pct_by_window": mine.regret_pct_by_window if mine else None,
        "ratio_vs_best_baseline": ratio(
            mine.final_regret_pct if mine else None, best[1] if best else None
        ),
        "cum_ratio_vs_best_baseline": ratio(
            mine.cum_regret_pct if mine else None, best_cum[1] if best_cum else None
        ),
        "product": _entry(product) if product is not None else PRODUCT_NOT_RUN,
        "product_variants": {r.name: _entry(r) for r in variants},
        "best_baseline": best[0] if best else None,
        "best_baseline_final_regret_pct": best[1] if best else None,
        "best_cumulative_baseline": best_cum[0] if best_cum else None,
        "best_baseline_cum_regret_pct": best_cum[1] if best_cum else None,
        "baselines": {r.name: _entry(r) for r in baselines},
        "shortest_run_slates": cut if at_cut else None,
        "cum_regret_pct_at_shortest_run": at_cut,
    }
