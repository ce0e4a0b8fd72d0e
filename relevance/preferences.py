"""What a user's stated category preferences do to a ranking, wherever it is ranked (the
origin's pipeline and an edge's pool ranking): a negative preference of full strength
hides the category, any other moves its items' scores by ``SHIFT_PER_STRENGTH`` probit
units per unit of strength, up or down. An edge's pool names its candidates' categories
(``shifts``), the origin's item index numbers them (``shifts_by_code``): one rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

# A negative preference this strong hides the category.
EXCLUDE_STRENGTH = 1.0
# A full-strength preference moves an item by this much on the probit scale (about a
# tenth of the scale's useful width): enough to lift a liked category over close
# neighbours, not to bury every relevant item of a category the user only mildly dislikes.
SHIFT_PER_STRENGTH = 0.5


def excluded(strengths: Mapping[str, float]) -> frozenset[str]:
    """The categories the user never wants to see."""
    return frozenset(c for c, s in strengths.items() if s <= -EXCLUDE_STRENGTH)


def shifts(categories: Sequence[str], strengths: Mapping[str, float]) -> npt.NDArray[np.float64]:
    """Per candidate (its category), the score shift of the user's preference for it."""
    return np.array([SHIFT_PER_STRENGTH * strengths.get(c, 0.0) for c in categories])


def shifts_by_code(
    category: npt.NDArray[np.integer[Any]], strengths: Mapping[int, float]
) -> npt.NDArray[np.float64]:
    """``shifts`` for candidates given by category code (``category``: each one's), with
    the strengths by code; 0 for a category without a preference."""
    shift = np.zeros(category.shape, np.float64)
    for code, strength in strengths.items():
        shift[category == code] = SHIFT_PER_STRENGTH * strength
    return shift
