"""``benchmarks.edge_hit``'s figure: each target's requests/s, and its latency (p50, p99 as
wrk reports them) under load and one request at a time, the edge beside its baselines."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from perso import plots


@dataclass(frozen=True, slots=True)
class TargetFigures:
    rps: float
    p50_ms: float
    p99_ms: float
    one_p50_ms: float  # one connection: one request at a time
    one_p99_ms: float


def plot(path: Path, targets: Mapping[str, TargetFigures], connections: int) -> None:
    """``targets`` by label, in the order drawn (a target not measured is left out)."""
    labels = list(targets)
    xs = range(len(labels))
    colours = ["C0" if label in ("edge", "personal") else "0.6" for label in labels]
    with plots.figure(
        path,
        "Edge hit path on one core: the edge against servers sending the same bytes",
        panels=3,
        width=11,
        height=4.2,
    ) as (rps, loaded, one):
        rps.bar(xs, [targets[t].rps for t in labels], color=colours)
        rps.set_xticks(xs, labels, rotation=20)
        plots.labelled(rps, "throughput", "", "requests/s")
        for ax, (p50, p99), title in (
            (loaded, ("p50_ms", "p99_ms"), f"latency, {connections} connections (queueing)"),
            (one, ("one_p50_ms", "one_p99_ms"), "latency, one request at a time"),
        ):
            ax.bar(
                [x - 0.2 for x in xs],
                [getattr(targets[t], p50) for t in labels],
                0.4,
                label="p50",
                color="C0",
            )
            ax.bar(
                [x + 0.2 for x in xs],
                [getattr(targets[t], p99) for t in labels],
                0.4,
                label="p99",
                color="C1",
            )
            ax.set_xticks(xs, labels, rotation=20)
            plots.labelled(ax, title, "", "ms (wrk)")
