"""Printing a benchmark's result: readable lines, then the JSON object as the last line."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    position = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[position]


def finish(figures: dict[str, Any]) -> None:
    print(json.dumps({**figures, "machine": machine()}, sort_keys=False))


def save_and_finish(
    result: dict[str, Any], json_path: Path, png_path: Path, no_plot: str | None, started: float
) -> None:
    """Write ``result`` (with where its files are and how long the run took, from
    ``started``, a ``time.perf_counter`` reading) to ``json_path``, say where it and the
    plot are (``no_plot``: why there is none), then ``finish``."""
    result |= {
        "json": str(json_path),
        "png": None if no_plot else str(png_path),
        "seconds": round(time.perf_counter() - started, 1),
    }
    json_path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nfigures: {json_path}; plot: {no_plot or png_path}")
    print(f"took {result['seconds']:.0f} s")
    finish(result)
