"""``perso catalog load``: a JSON-lines catalog streamed to the origin's admin API in batches.

Each line is one item of ``POST /v1/admin/catalog/items`` (docs/catalog.md). A line that is
not a JSON object, and every item of a batch the origin refuses with a 400, count as
rejected (with the line and the reason); loading goes on with the next batch. Sending the
same file again is safe: the origin writes only versions newer than it has.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import httpx

from protocol.exceptions import PersoError

ENDPOINT = "/v1/admin/catalog/items"
COUNTS = ("inserted", "updated", "unchanged", "skipped", "rejected")


class LoadError(PersoError):
    """The origin cannot be reached or refused the credentials."""


@dataclass
class LoadTotals:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    lines: int = 0

    def add(self, answer: dict[str, Any]) -> None:
        for key in COUNTS:
            self.counts[key] += int(answer.get(key, 0))

    def summary(self) -> str:
        return ", ".join(f"{key} {self.counts[key]}" for key in COUNTS)


@dataclass
class Batch:
    lines: list[int]  # line number of each item
    items: list[dict[str, Any]]
    bad: list[tuple[int, str]]  # lines that are not items, with the reason


def batches(source: TextIO, size: int) -> Iterator[Batch]:
    """Items of a JSON-lines file, ``size`` at a time; blank lines are ignored."""
    batch = Batch([], [], [])
    for number, line in enumerate(source, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            batch.bad.append((number, f"not JSON: {exc}"))
            continue
        if not isinstance(item, dict):
            batch.bad.append((number, "not a JSON object"))
            continue
        batch.lines.append(number)
        batch.items.append(item)
        if len(batch.items) >= size:
            yield batch
            batch = Batch([], [], [])
    if batch.items or batch.bad:
        yield batch


def count_lines(path: Path) -> int:
    with path.open("rb") as source:
        return sum(1 for line in source if line.strip())


def _line_of(field: str | None, lines: list[int]) -> str:
    """``"[3].image"`` of a batch -> ``"line 1204, image"``."""
    if field and field.startswith("[") and "]" in field:
        position, rest = field[1:].split("]", 1)
        if position.isdigit() and int(position) < len(lines):
            return f"line {lines[int(position)]}{', ' + rest.lstrip('.') if rest else ''}"
    return field or "body"


async def load(
    path: Path,
    *,
    origin_url: str,
    token: str,
    batch: int = 500,
    say: Callable[[str], None] = print,
    client: httpx.AsyncClient | None = None,
) -> LoadTotals:
    """Send every item of ``path``; returns the totals (``rejected`` included)."""
    total = count_lines(path)
    totals = LoadTotals()
    started = time.monotonic()
    headers = {"authorization": f"Bearer {token}"}
    own = client is None
    http = client or httpx.AsyncClient(base_url=origin_url, timeout=300.0)
    try:
        with path.open(encoding="utf-8") as source:
            for chunk in batches(source, batch):
                for number, reason in chunk.bad:
                    say(f"line {number}: {reason}")
                totals.counts["rejected"] += len(chunk.bad)
                if chunk.items:
                    await _send(http, chunk, headers, totals, say)
                totals.lines += len(chunk.items) + len(chunk.bad)
                rate = totals.lines / max(time.monotonic() - started, 1e-9)
                say(f"{totals.lines}/{total} items, {rate:.0f} items/s; {totals.summary()}")
    finally:
        if own:
            await http.aclose()
    return totals


async def _send(
    http: httpx.AsyncClient,
    chunk: Batch,
    headers: dict[str, str],
    totals: LoadTotals,
    say: Callable[[str], None],
) -> None:
    try:
        response = await http.post(ENDPOINT, json=chunk.items, headers=headers)
    except httpx.HTTPError as exc:
        raise LoadError(f"cannot reach the origin at {http.base_url}: {exc!r}") from exc
    if response.status_code == 200:
        totals.add(response.json())
        return
    if response.status_code == 401:
        raise LoadError(f"the origin refused the admin token: {response.json().get('reason')}")
    if response.status_code != 400:
        raise LoadError(f"the origin answered {response.status_code}: {response.text[:500]}")
    problem = response.json()
    for error in problem.get("errors") or [problem]:
        say(f"rejected: {_line_of(error.get('field'), chunk.lines)}: {error.get('reason')}")
    totals.counts["rejected"] += len(chunk.items)
