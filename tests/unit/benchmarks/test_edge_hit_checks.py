"""What ``benchmarks.edge_hit`` accepts as a personal hit, best case and realistic, and the
model updates its realistic mode sends."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from benchmarks.edge_hit import PersonalCheck
from benchmarks.model_updates import ModelUpdates
from relevance.user_model import model_bytes, model_from_bytes


def check(counted: dict[str, int], *, realistic: bool, requests: int = 100) -> PersonalCheck:
    return PersonalCheck(
        requests=requests,
        counted=Counter(counted),
        x_cache=Counter({"HIT": 4}),
        tiers=Counter({"edge": 4}),
        slack=10,
        realistic=realistic,
    )


@pytest.mark.parametrize(
    ("counted", "realistic", "ranked_here"),
    [
        ({"ranked_here": 100, "hit": 100, "ranked_from_bank": 90}, False, True),
        ({"ranked_here": 100, "hit": 100, "ranked_from_bank": 40}, True, True),
        # a pool refreshed in the background: only the realistic mode refreshes pools
        ({"ranked_here": 100, "hit": 100, "pool_fills": 1}, True, True),
        ({"ranked_here": 100, "hit": 100, "pool_fills": 1}, False, False),
        # a user's state asked of the origin, or an answer that missed: never a hit
        ({"ranked_here": 100, "hit": 100, "user_fetches": 1}, True, False),
        ({"ranked_here": 100, "hit": 99, "miss": 1}, True, False),
        # fewer ranked here than wrk counted
        ({"ranked_here": 90, "hit": 90}, True, False),
    ],
)
def test_all_ranked_here(counted: dict[str, int], realistic: bool, ranked_here: bool) -> None:
    assert check(counted, realistic=realistic).all_ranked_here() is ranked_here


@pytest.mark.parametrize(
    ("counted", "share"),
    [
        ({"ranked_here": 200, "ranked_from_bank": 80}, 0.4),
        ({"ranked_here": 3, "ranked_from_bank": 2}, 0.667),
        ({}, None),
    ],
)
def test_bank_share(counted: dict[str, int], share: float | None) -> None:
    assert check(counted, realistic=True).bank_share == share


def test_an_update_holds_a_model_the_edge_reads() -> None:
    updates = ModelUpdates(
        redis_url="redis://127.0.0.1:1/0",
        regions=("r",),
        users=["u-1"],
        dim=16,
        prior_scale=1.0,
        ranked=lambda: 0,
    )
    model = model_from_bytes(model_bytes(updates.model()), 16)
    assert model.dim == 16
    assert np.all(model.var < 1.0 / 16)
    assert np.any(model.mean != 0)


def test_updates_need_users() -> None:
    with pytest.raises(ValueError, match="users"):
        ModelUpdates(
            redis_url="redis://127.0.0.1:1/0",
            regions=("r",),
            users=[],
            dim=16,
            prior_scale=1.0,
            ranked=lambda: 0,
        )
