"""The house's pictures: one look for every PNG that ``perso demo`` and the benchmarks write.

matplotlib draws with its Agg backend, chosen here once, before pyplot is imported, so no
process ever looks for a display. Every figure is a titled grid of panels (title with what
and the unit, labelled axes, a grid, a legend when something is labelled) about 880 px wide,
the README's width, and is written atomically (a temporary file renamed over the PNG): a
reader never sees half a picture. Only this module imports matplotlib (``Axes`` is here for
the drawing code's types), and no package of the product imports it (tests/unit/test_layers).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib

# Before pyplot is imported: no process that draws ever looks for a display.
matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

__all__ = ["Axes", "cdf", "cdf_points", "figure", "labelled", "log_scale", "no_data", "save"]

WIDTH_IN = 8.0
PANEL_HEIGHT_IN = 3.6
DPI = 110
# Readable when the PNG is shown at the README's width; colours told apart in greyscale too.
STYLE: dict[str, Any] = {
    "font.size": 9.5,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.labelsize": 9.5,
    "legend.fontsize": 8.5,
    "legend.framealpha": 0.9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "grid.alpha": 0.35,
    "lines.linewidth": 1.8,
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
}


@contextmanager
def figure(
    path: Path,
    title: str,
    *,
    panels: int = 1,
    rows: int = 1,
    width: float = WIDTH_IN,
    height: float | None = None,
) -> Iterator[list[Axes]]:
    """Panels (``rows`` of ``panels``, read left to right, top to bottom) to draw
    on; on leaving, the house look is applied and the figure written to ``path``."""
    # matplotlib types rc names as a Literal of them all, not as str.
    with plt.rc_context(STYLE):  # type: ignore[arg-type]
        fig, grid = plt.subplots(
            rows,
            panels,
            figsize=(width, height or PANEL_HEIGHT_IN * rows + 0.5),
            squeeze=False,
        )
        axes = [ax for row in grid for ax in row]
        try:
            yield axes
            for ax in axes:
                ax.grid(True)
                labels = ax.get_legend_handles_labels()[1]
                # A panel that placed its own legend keeps it.
                if ax.get_legend() is None and any(not k.startswith("_") for k in labels):
                    ax.legend(loc="best")
            fig.suptitle(title, fontsize=11, fontweight="bold")
            fig.tight_layout()
            save(fig, path)
        finally:
            plt.close(fig)


def save(fig: Figure, path: Path) -> None:
    """Write ``fig`` as a PNG at ``path`` atomically (rename over the old file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    fig.savefig(partial, format="png", dpi=DPI)
    os.replace(partial, path)


def labelled(ax: Axes, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def cdf_points(samples: Sequence[float]) -> tuple[list[float], list[float]]:
    """The empirical CDF of ``samples``: sorted values and the share at or below each."""
    ordered = sorted(samples)
    count = len(ordered)
    return ordered, [(i + 1) / count for i in range(count)]


def cdf(
    ax: Axes,
    samples: Sequence[float],
    label: str,
    *,
    log_x: bool = False,
    color: str | None = None,
    linestyle: str = "-",
) -> None:
    """One labelled empirical CDF on ``ax`` (nothing for no samples)."""
    if not samples:
        return
    xs, ys = cdf_points(samples)
    ax.step(xs, ys, where="post", label=label, color=color, linestyle=linestyle)
    ax.set_ylim(0, 1.02)
    if log_x and xs[0] > 0:
        log_scale(ax, "x")


def log_scale(ax: Axes, axis: str = "x") -> None:
    """A log scale whose ticks read as plain numbers (0.5, 1, 10), not powers of ten."""
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    limits = ax.get_xlim if axis == "x" else ax.get_ylim

    def minor(value: float, _: int) -> str:
        # Between the powers of ten only 2 and 5 are labelled, and only on a short axis:
        # more would run together.
        low, high = limits()
        short = low > 0 and math.log10(high / low) <= 2.5
        return f"{value:g}" if short and _mantissa(value) in (2, 5) else ""

    scale = ax.xaxis if axis == "x" else ax.yaxis
    if axis == "x":
        ax.set_xscale("log")
    else:
        ax.set_yscale("log")
    scale.set_major_formatter(plain)
    scale.set_minor_formatter(FuncFormatter(minor))


def _mantissa(value: float) -> int:
    return round(value / 10 ** math.floor(math.log10(value))) if value > 0 else 0


def no_data(ax: Axes, why: str) -> None:
    """Say on the panel why it is empty, rather than draw an empty grid."""
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, wrap=True)
