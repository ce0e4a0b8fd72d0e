"""Printing a benchmark's result: readable lines, then the JSON object as the last line."""

from __future__ import annotations

import json
import os
import platform
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
