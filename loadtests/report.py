"""Per-region figures of a Locust run, from the rows of its ``*_stats.csv``.

Requests are named ``"<region> <what>"`` (``us-east personalize``). Beside them, each
process running users adds one row per region of type ``region`` (``REGION_ROW``) that
counts every request to that region's edges once more (Locust's ``Aggregated`` row is
kept apart and does not count them twice). Locust merges those rows from its workers like
any other, histograms included, so a region's percentiles are Locust's own over all of its
requests, not a blend of per-name percentiles. This module reads them back.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REGION_ROW = "region"  # the Type column of a region's row
AGGREGATED = "Aggregated"  # Locust's name of its row over every request


def request_name(region: str, what: str) -> str:
    return f"{region} {what}"


def region_of(name: str, regions: Iterable[str]) -> str | None:
    """The region a request named by ``request_name`` went to; None for other requests
    (the user tokens, from the origin)."""
    head = name.split(" ", 1)[0]
    return head if head != name and head in set(regions) else None


@dataclass(frozen=True, slots=True)
class Figures:
    name: str
    requests: int
    failures: int
    rps: float
    p50_ms: float | None  # None: no request, Locust writes N/A
    p95_ms: float | None
    p99_ms: float | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _number(value: str | None) -> float | None:
    if value is None or value.strip() in ("", "N/A"):
        return None
    return float(value)


def _figures(name: str, row: Mapping[str, str]) -> Figures:
    return Figures(
        name=name,
        requests=int(row["Request Count"]),
        failures=int(row["Failure Count"]),
        rps=float(row["Requests/s"]),
        p50_ms=_number(row.get("50%")),
        p95_ms=_number(row.get("95%")),
        p99_ms=_number(row.get("99%")),
    )


def region_figures(rows: Iterable[Mapping[str, str]], regions: Sequence[str]) -> list[Figures]:
    """One entry per region, in ``regions``' order; a region without a row got no request."""
    found = {row["Name"]: row for row in rows if row.get("Type") == REGION_ROW}
    return [
        _figures(region, found[region])
        if region in found
        else Figures(region, 0, 0, 0.0, None, None, None)
        for region in regions
    ]


def aggregated(rows: Iterable[Mapping[str, str]]) -> Figures | None:
    """Locust's row over every request (the user tokens included), if it wrote one."""
    for row in rows:
        if row.get("Name") == AGGREGATED and not row.get("Type"):
            return _figures("all requests", row)
    return None


def exception_count(rows: Iterable[Mapping[str, str]]) -> int:
    """Exceptions raised in the users' own code, from ``*_exceptions.csv``: the requests
    they interrupted are in no other row."""
    return sum(int(row["Count"]) for row in rows)


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as file:
        return list(csv.DictReader(file))


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def table(figures: Sequence[Figures]) -> str:
    """Rows of ``figures`` as a text table."""
    header = ("region", "requests", "failures", "rps", "p50 ms", "p95 ms", "p99 ms")
    lines = [
        (
            f.name,
            f"{f.requests:,}",
            f"{f.failures:,}",
            f"{f.rps:,.1f}",
            _ms(f.p50_ms),
            _ms(f.p95_ms),
            _ms(f.p99_ms),
        )
        for f in figures
    ]
    widths = [max(len(row[i]) for row in (header, *lines)) for i in range(len(header))]

    def render(row: Sequence[str]) -> str:
        numbers = zip(row[1:], widths[1:], strict=True)
        return "  ".join([row[0].ljust(widths[0]), *(cell.rjust(w) for cell, w in numbers)])

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([render(header), rule, *(render(row) for row in lines)])
