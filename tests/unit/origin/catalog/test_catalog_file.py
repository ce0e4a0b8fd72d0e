"""A catalog file checked whole, problems named by line and field (pure, no stores)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from origin.catalog.catalog_file import (
    REPORTED_PROBLEMS,
    LineProblem,
    check_lines,
    item_batches,
)

DIMS = {"text": 8, "image": 4, "audio": 4, "video": 4}


def item(item_id: str = "sku-1", **fields: Any) -> str:
    body = {"item_id": item_id, "version": 1, "title": "Tent", "category": "outdoors", "price": 9}
    return json.dumps({**body, **fields})


P = LineProblem


@pytest.mark.parametrize(
    ("lines", "items", "problems"),
    [
        ([item()], 1, []),
        ([item("a"), "", "   ", item("b")], 2, []),  # blank lines are no items and no error
        ([], 0, []),
        (["{not json"], 0, [P(1, "", "not JSON: Expecting property name")]),
        (["[1, 2]"], 0, [P(1, "", "not a JSON object but list")]),
        ([item(), item(price=-1)], 1, [P(2, "price", "greater than or equal to 0")]),
        ([item(), item()], 1, [P(2, "item_id", "repeats the item of line 1")]),
        ([item(), "", item()], 1, [P(3, "item_id", "repeats the item of line 1")]),
        ([item(image=[1.0, 0.0, 0.0])], 0, [P(1, "image", "has 3 numbers, image vectors have 4")]),
        ([item(audio=[0.0] * 4)], 0, [P(1, "audio", "is all zeros")]),
        ([item(video=[1.0, "x", 0.0, 0.0])], 0, [P(1, "video[1]", "a valid number")]),
        ([item(colour="red")], 0, [P(1, "colour", "Extra inputs are not permitted")]),
        (
            [json.dumps({"item_id": "a", "version": 1})],
            0,
            [P(1, "title", "required"), P(1, "category", "required"), P(1, "price", "required")],
        ),
    ],
)
def test_every_problem_is_named_by_line_and_field(
    lines: list[str], items: int, problems: list[LineProblem]
) -> None:
    check = check_lines(lines, DIMS)
    assert (check.items, check.ok) == (items, not problems)
    assert [(p.line, p.field) for p in check.problems] == [(p.line, p.field) for p in problems]
    for found, expected in zip(check.problems, problems, strict=True):
        assert expected.reason in found.reason


def test_the_first_problems_are_kept_and_the_rest_counted() -> None:
    check = check_lines(["nope"] * (REPORTED_PROBLEMS + 5), DIMS)
    assert len(check.problems) == REPORTED_PROBLEMS
    assert check.problem_count == REPORTED_PROBLEMS + 5
    report = check.report().splitlines()
    assert report[0].startswith("line 1: not JSON")
    assert report[-1] == "... and 5 more problems"


@pytest.mark.parametrize(
    ("count", "size", "sizes"), [(5, 2, [2, 2, 1]), (4, 2, [2, 2]), (0, 3, [])]
)
def test_a_checked_file_comes_in_batches(count: int, size: int, sizes: list[int]) -> None:
    lines = [item(f"sku-{n}") for n in range(count)]
    batches = list(item_batches(["", *lines], DIMS, size))
    assert [len(b) for b in batches] == sizes
    assert [i.item_id for b in batches for i in b] == [f"sku-{n}" for n in range(count)]
