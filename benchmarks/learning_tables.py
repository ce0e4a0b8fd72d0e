"""What a run of ``benchmarks.learning`` prints and draws, from the figures of
``benchmarks.learning_report``: a table per world, the family's summary, a PNG per world.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.learning_policies import PERSO
from benchmarks.regret import WINDOWS, window_bounds
from perso import plots
from perso.console import table


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def pts(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}"


def _spread(median: float | None, bounds: Sequence[float | None]) -> str:
    low, high = bounds
    if median is None or low is None or high is None:
        return pct(median)
    return f"{median:.1f}% ({low:.1f}-{high:.1f})"


def world_table(name: str, figures: Mapping[str, Any]) -> str:
    """One world: each policy's final tenth and cumulative regret (median over the seeds,
    their range) and clicks per slate."""
    about = figures["about"]
    refs = "; ".join(f"{k} {v:.1f}%" for k, v in about["references_regret_pct"].items())
    rows: list[list[object]] = []
    notes = []
    for policy, f in figures["policies"].items():
        clicks = f["clicks_per_slate"]
        rows.append(
            [
                policy,
                _spread(f["final_regret_pct"], f["final_regret_pct_range"]),
                _spread(f["cum_regret_pct"], f["cum_regret_pct_range"]),
                "-" if clicks is None else f"{clicks:.3f}",
            ]
        )
        if "missing" in f:
            notes.append(f"{policy}: {f['missing']}")
    head = (
        f"{name}: {about['summary']}; {about['slates']:,} slates, product paced at "
        f"{about['pace']:g}/s; oracle {about['oracle_clicks_per_slate']:.3f} clicks a slate"
    )
    headers = ["policy", "final tenth (min-max)", "cumulative (min-max)", "clicks/slate"]
    return "\n".join([head, table(headers, rows), *notes, f"(references from the truth: {refs})"])


def _rival(best: Sequence[Any] | None) -> str:
    return "-" if best is None else f"{pct(best[1])} ({best[0]})"


def summary_table(result: Mapping[str, Any]) -> str:
    """The family: per world, the product against its best rival, and the product's median
    and worst world."""
    rows: list[list[object]] = []
    for name, f in result["by_world"].items():
        mine = f["policies"].get(PERSO, {})
        rows.append(
            [
                name,
                f"{f['about']['visible_r2']:.2f}",
                pct(mine.get("final_regret_pct")),
                pct(mine.get("cum_regret_pct")),
                _rival(f["best_rival_final"]),
                _rival(f["best_rival_cum"]),
                "yes" if f["won"] else "no",
                pts(f["first_tenth_gap_pts"]),
                "-" if f["edge_origin_gap_final_pts"] is None
                else f"{f['edge_origin_gap_final_pts']:.1f}",
            ]
        )  # fmt: skip
    rows.append(
        [
            f"median / worst ({result['worlds_won']} of {result['worlds']} won)",
            "",
            f"{pct(result['median_final_regret_pct'])} / {pct(result['worst_final_regret_pct'])}",
            f"{pct(result['median_cum_regret_pct'])} / {pct(result['worst_cum_regret_pct'])}",
            "", "", "", "", "",
        ]
    )  # fmt: skip
    headers = [
        "world", "visible_r2", "perso final", "perso cum", "best lin_ts/vw final",
        "best lin_ts/vw cum", "won", "1st tenth vs best", "|edge-origin| final",
    ]  # fmt: skip
    return "\n".join(
        [
            table(headers, rows),
            "won: perso's median final and cumulative regret below both lin_ts's and "
            "vw_cb_adf's; 1st tenth vs best: perso's first tenth minus the best baseline's, "
            "in points",
        ]
    )


def plot(path: Path, name: str, figures: Mapping[str, Any]) -> None:
    """A world's regret% per tenth, median over the seeds, one line per policy; the
    reference lines from the truth dashed."""
    slates = int(figures["about"]["slates"])
    middles = [(start + end) / 2 for start, end in window_bounds(slates, WINDOWS)]
    with plots.figure(
        path, f"Learning in the {name} shop: regret against the oracle (%)", height=4.8
    ) as [ax]:
        for policy, f in figures["policies"].items():
            windows = f["regret_pct_by_window"]
            if windows:
                values = [math.nan if v is None else v for v in windows]
                ax.plot(middles, values, marker="o", label=policy)
        for label, value in figures["about"]["references_regret_pct"].items():
            ax.axhline(value, linestyle="--", linewidth=1, color="grey")
            ax.annotate(label, (0, value), xytext=(2, 2), textcoords="offset points", fontsize=8)
        ax.set_xlim(0, slates)
        ax.set_ylim(0, 100)
        plots.labelled(
            ax,
            "",
            "slates served (window midpoints, tenths of the run)",
            "regret % in the window, median over seeds (vs the oracle's expected clicks)",
        )
