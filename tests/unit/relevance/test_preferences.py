from __future__ import annotations

import numpy as np
import pytest

from origin.ranking.preferences import by_code
from relevance.preferences import excluded, shifts, shifts_by_code


@pytest.mark.parametrize(
    ("strengths", "hidden"),
    [
        ({}, set()),
        ({"books": -1.0}, {"books"}),
        ({"books": -0.99, "toys": 1.0}, set()),
        ({"books": -1.0, "toys": -1.0, "garden": 0.3}, {"books", "toys"}),
    ],
)
def test_a_full_strength_negative_hides_its_category(
    strengths: dict[str, float], hidden: set[str]
) -> None:
    assert excluded(strengths) == hidden


@pytest.mark.parametrize(
    ("categories", "strengths", "expected"),
    [
        ([], {"books": 1.0}, []),
        (["books", "toys", "books"], {"books": 1.0}, [0.5, 0.0, 0.5]),
        (["books", "toys"], {"books": -0.4, "toys": 0.2}, [-0.2, 0.1]),
    ],
)
def test_shifts_by_category(
    categories: list[str], strengths: dict[str, float], expected: list[float]
) -> None:
    assert shifts(categories, strengths).tolist() == pytest.approx(expected)


@pytest.mark.parametrize(
    ("category", "strengths", "expected"),
    [
        ([0, 1, 2], {}, [0.0, 0.0, 0.0]),
        ([0, 1, 2], {1: 1.0}, [0.0, 0.5, 0.0]),
        ([0, 1, 1, 2], {1: -0.5, 2: 0.25}, [0.0, -0.25, -0.25, 0.125]),
        ([3, 3], {7: 1.0}, [0.0, 0.0]),
        ([], {1: 1.0}, []),
    ],
)
def test_shifts_by_category_code(
    category: list[int], strengths: dict[int, float], expected: list[float]
) -> None:
    shift = shifts_by_code(np.array(category, np.int32), strengths)
    assert shift.tolist() == pytest.approx(expected)


@pytest.mark.parametrize("strengths", [{"books": 0.7}, {"books": -0.5, "toys": 1.0}, {}])
def test_the_edge_and_the_origin_shift_alike(strengths: dict[str, float]) -> None:
    """The origin shifts by category code, an edge's pool by category name: same numbers."""
    names = ["books", "toys", "garden", "books"]
    code = {"books": 0, "toys": 1, "garden": 2}
    origin = shifts_by_code(np.array([code[n] for n in names]), by_code(strengths, code.get))
    assert origin.tolist() == shifts(names, strengths).tolist()
