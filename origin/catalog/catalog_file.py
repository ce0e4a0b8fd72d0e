"""A catalog file of your own (``PERSO_CATALOG=items.jsonl``): JSON lines, one item of
``POST /v1/admin/catalog/items`` per line (``origin.catalog.ingest.CatalogItemIn``), blank
lines ignored, as ``perso catalog load`` reads them.

The whole file is checked before anything is written (``check_lines``): every line must be
a JSON object that is a valid item, with vectors of the configured dimensions and an item
id no earlier line has. Problems are named by line and field; the first
``REPORTED_PROBLEMS`` are kept, the rest counted. Pure: the caller reads the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from pydantic import ValidationError

from origin.catalog.ingest import CatalogItemIn, item_problems
from origin.exceptions import CatalogFileError
from web.problems import field_path

REPORTED_PROBLEMS = 20


@dataclass(frozen=True, slots=True)
class LineProblem:
    line: int  # 1-based, as an editor counts
    field: str  # "" when the line as a whole is wrong
    reason: str

    def __str__(self) -> str:
        where = f"line {self.line}, {self.field}" if self.field else f"line {self.line}"
        return f"{where}: {self.reason}"


@dataclass
class FileCheck:
    items: int = 0  # valid items
    problems: list[LineProblem] = field(default_factory=list)  # the first REPORTED_PROBLEMS
    problem_count: int = 0

    @property
    def ok(self) -> bool:
        return self.problem_count == 0

    def add(self, problem: LineProblem) -> None:
        self.problem_count += 1
        if len(self.problems) < REPORTED_PROBLEMS:
            self.problems.append(problem)

    def report(self) -> str:
        """The problems, one a line, then how many more there are."""
        lines = [str(p) for p in self.problems]
        more = self.problem_count - len(self.problems)
        if more > 0:
            lines.append(f"... and {more} more problem{'s' if more > 1 else ''}")
        return "\n".join(lines)


def parse_line(text: str, dims: Mapping[str, int]) -> CatalogItemIn | list[tuple[str, str]]:
    """The item on one line, or its problems as (field, reason)."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        return [("", f"not JSON: {exc}")]
    if not isinstance(raw, dict):
        return [("", f"not a JSON object but {type(raw).__name__}")]
    try:
        item = CatalogItemIn.model_validate(raw)
    except ValidationError as exc:
        return [(field_path(e["loc"]), e["msg"]) for e in exc.errors()]
    problems = item_problems([item], dict(dims))
    if problems:
        return [(p.field.removeprefix("[0]."), p.reason) for p in problems]
    return item


def numbered(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(line number, text) of the lines that are not blank."""
    for number, text in enumerate(lines, start=1):
        if text.strip():
            yield number, text


def check_lines(lines: Iterable[str], dims: Mapping[str, int]) -> FileCheck:
    """Everything wrong with a catalog file (``dims``: modality -> vector dimension)."""
    check = FileCheck()
    first_line: dict[str, int] = {}
    for number, text in numbered(lines):
        parsed = parse_line(text, dims)
        if isinstance(parsed, list):
            for name, reason in parsed:
                check.add(LineProblem(number, name, reason))
            continue
        seen = first_line.setdefault(parsed.item_id, number)
        if seen != number:
            check.add(LineProblem(number, "item_id", f"repeats the item of line {seen}"))
            continue
        check.items += 1
    return check


def item_batches(
    lines: Iterable[str], dims: Mapping[str, int], size: int
) -> Iterator[list[CatalogItemIn]]:
    """The items of a file ``check_lines`` found valid, ``size`` at a time."""
    batch: list[CatalogItemIn] = []
    for number, text in numbered(lines):
        parsed = parse_line(text, dims)
        if isinstance(parsed, list):
            raise CatalogFileError(f"line {number} changed since the file was checked")
        batch.append(parsed)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
