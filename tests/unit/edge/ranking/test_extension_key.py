"""Which rows of users' own candidates a ranking may join (``extension_key``): those sent
for its context cell and what its constraints allow, whatever else the request asks."""

from __future__ import annotations

from typing import Any

import pytest

from edge.ranking.own_candidates import extension_key
from protocol.api import Constraints


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ({}, {}, True),
        ({}, {"count": 5}, True),
        ({}, {"exclude_items": ["sku-1"]}, True),
        ({"categories": ["a", "b"]}, {"categories": ["b", "a"]}, True),
        ({"categories": ["a"]}, {"categories": ["a", "b"]}, False),
        ({}, {"categories": []}, True),  # either allows any
        ({}, {"categories": ["a"]}, False),
        ({"price_range": {"min": 1, "max": 9}}, {"price_range": {"min": 1, "max": 9}}, True),
        ({"price_range": {"min": 1}}, {"price_range": {"max": 1}}, False),
        ({}, {"price_range": {"min": 1}}, False),
    ],
)
def test_rows_are_shared_by_what_the_constraints_allow(
    a: dict[str, Any], b: dict[str, Any], same: bool
) -> None:
    first = extension_key("mobile:evening", Constraints(**a))
    second = extension_key("mobile:evening", Constraints(**b))
    assert (first == second) is same


def test_rows_of_another_cell_are_not_shared() -> None:
    assert extension_key("mobile:evening", Constraints()) != extension_key(
        "desktop:evening", Constraints()
    )
