from __future__ import annotations

import numpy as np
import pytest

from edge.user_models import ENTRY_OVERHEAD_BYTES, UserModels
from relevance.user_model import UserModel

DIM = 4
COST = 2 * 4 * DIM + ENTRY_OVERHEAD_BYTES  # two float32 vectors and the overhead


def model(value: float, dim: int = DIM) -> UserModel:
    return UserModel(np.full(dim, value, np.float32), np.full(dim, 0.5, np.float32))


@pytest.mark.parametrize(
    ("updates", "version", "mean"),
    [
        ([(1, 0.1)], 1, 0.1),
        ([(1, 0.1), (2, 0.2)], 2, 0.2),
        ([(2, 0.2), (1, 0.1)], 2, 0.2),  # an older update arriving late changes nothing
        ([(2, 0.2), (2, 0.9)], 2, 0.2),  # a redelivery (same version) changes nothing
        ([(1, 0.1), (5, 0.5), (3, 0.3)], 5, 0.5),
    ],
    ids=["one", "newer", "older-late", "same-again", "out-of-order"],
)
def test_versions_never_go_back(
    updates: list[tuple[int, float]], version: int, mean: float
) -> None:
    table = UserModels(10_000, DIM)
    for v, m in updates:
        table.apply("ann", v, model(m))
    held = table.get("ann")
    assert held is not None
    assert (held.version, float(held.model.mean[0])) == (version, pytest.approx(mean))


def test_apply_says_whether_it_changed_anything() -> None:
    table = UserModels(10_000, DIM)
    assert table.apply("ann", 2, model(0.2)) is True
    assert table.apply("ann", 1, model(0.1)) is False
    assert table.apply("ann", 2, model(0.1)) is False
    assert table.apply("ann", 3, model(0.3)) is True


def test_the_budget_drops_the_least_recently_used() -> None:
    table = UserModels(3 * COST, DIM)
    for user in ("ann", "bob", "cid"):
        table.apply(user, 1, model(0.1))
    assert table.bytes == 3 * COST
    assert table.get("ann") is not None  # ann used: bob is now the least recent
    table.apply("dee", 1, model(0.1))
    assert table.get("bob") is None
    assert {u for u in ("ann", "cid", "dee") if table.get(u) is not None} == {"ann", "cid", "dee"}
    assert (len(table), table.evicted, table.bytes) == (3, 1, 3 * COST)


def test_a_newer_model_replaces_the_older_ones_cost() -> None:
    table = UserModels(10 * COST, DIM)
    table.apply("ann", 1, model(0.1))
    table.apply("ann", 2, model(0.2))
    table.forget("ann")
    table.forget("nobody")
    assert (len(table), table.bytes) == (0, 0)


def test_a_model_of_another_dimension_is_refused() -> None:
    table = UserModels(10 * COST, DIM)
    with pytest.raises(ValueError, match="dimension 8, the edge's is 4"):
        table.apply("ann", 1, model(0.1, dim=8))
    assert table.get("ann") is None


def test_a_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="budget_bytes"):
        UserModels(0, DIM)
