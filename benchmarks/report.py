"""A benchmark's result: readable lines, then the JSON object as the last line; with a
curve or a distribution, its JSON and PNG side by side in ``.perso/bench/<name>/``."""

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


def results_dir(name: str) -> Path:
    """Where a benchmark writes its JSON and PNG unless told (``--out``)."""
    return Path(".perso/bench") / name


def quantiles(samples: list[float], points: int = 101) -> list[float]:
    """``points`` evenly spaced quantiles (0 to 100%) of ``samples``: a distribution kept in
    the JSON at a bounded size, from which its CDF can be drawn again."""
    if not samples:
        return []
    return [round(percentile(samples, 100 * i / (points - 1)), 3) for i in range(points)]


def finish(figures: dict[str, Any]) -> None:
    print(json.dumps({**figures, "machine": machine()}, sort_keys=False))


def save_and_finish(
    result: dict[str, Any],
    json_path: Path,
    png_path: Path,
    started: float,
    distributions: dict[str, Any] | None = None,
) -> None:
    """Write ``result`` (with where its files are and how long the run took, from
    ``started``, a ``time.perf_counter`` reading) and ``distributions`` (the file's alone:
    too long for the last line) to ``json_path`` beside the PNG already drawn at
    ``png_path``, say where both are, then ``finish`` with ``result``."""
    result |= {
        "json": str(json_path),
        "png": str(png_path),
        "seconds": round(time.perf_counter() - started, 1),
    }
    json_path.parent.mkdir(parents=True, exist_ok=True)
    partial = json_path.with_name(f".{json_path.name}.partial")
    partial.write_text(json.dumps({**result, **(distributions or {})}, indent=2) + "\n")
    partial.replace(json_path)
    print(f"\nfigures: {json_path}; plot: {png_path}")
    print(f"took {result['seconds']:.0f} s")
    finish(result)
