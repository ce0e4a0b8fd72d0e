"""The item half of a bank's draws, shared by the banks drawn over one pool: shared for as
many banks as allowed, drawn anew for other terms or spreads, bounded; and the banks drawn
from shared item draws serve the policy's slates as often as banks that draw their own."""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt
import pytest

from edge.cache.prepared_pool import PreparedPool
from edge.ranking.item_draws import ItemDraws
from edge.ranking.pool_ranking import Policy, pool_runs
from relevance.slate import DRAWS, Candidates, runs
from relevance.user_model import UserModel
from tests.pools import make_pool

DIM = 8
PREPARED = PreparedPool.of(make_pool(60, DIM, 0))
RUNS = DRAWS + 1


def test_draws_are_shared_by_max_uses_banks_then_drawn_anew() -> None:
    draws, rng = ItemDraws(max_uses=3), np.random.default_rng(1)
    first = draws.for_bank(PREPARED.terms, 0.5, RUNS, rng)
    assert first.shape == (RUNS, len(PREPARED))
    assert draws.for_bank(PREPARED.terms, 0.5, RUNS, rng) is first
    assert draws.for_bank(PREPARED.terms, 0.5, RUNS, rng) is first
    fourth = draws.for_bank(PREPARED.terms, 0.5, RUNS, rng)
    assert fourth is not first
    assert not np.array_equal(fourth, first)
    assert (draws.counters.drawn, draws.counters.shared) == (2, 2)


@pytest.mark.parametrize(
    ("spread", "runs_", "same_terms"),
    [(0.25, RUNS, True), (0.5, 8, True), (0.5, RUNS, False)],
    ids=["another spread", "another number of runs", "other terms"],
)
def test_other_terms_spread_or_runs_are_drawn_for_themselves(
    spread: float, runs_: int, same_terms: bool
) -> None:
    draws, rng = ItemDraws(), np.random.default_rng(2)
    first = draws.for_bank(PREPARED.terms, 0.5, RUNS, rng)
    # the pool's terms as the workers' stream brings them up to date: another object
    terms = PREPARED.terms if same_terms else dataclasses.replace(PREPARED.terms)
    other = draws.for_bank(terms, spread, runs_, rng)
    assert other is not first
    assert other.shape == (runs_, len(PREPARED))


def test_the_pools_held_are_bounded() -> None:
    draws, rng = ItemDraws(max_pools=2), np.random.default_rng(3)
    pools = [PreparedPool.of(make_pool(20, DIM, seed)) for seed in range(3)]
    held = [draws.for_bank(p.terms, 0.5, RUNS, rng) for p in pools]
    assert len(draws) == 2
    assert draws.for_bank(pools[2].terms, 0.5, RUNS, rng) is held[2]
    assert draws.for_bank(pools[0].terms, 0.5, RUNS, rng) is not held[0]  # evicted


@pytest.mark.parametrize(("uses", "pools"), [(0, 1), (1, 0)])
def test_bounds_must_be_positive(uses: int, pools: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        ItemDraws(max_uses=uses, max_pools=pools)


def test_runs_refuse_item_draws_of_another_shape() -> None:
    c = Candidates.with_terms(PREPARED.terms, np.zeros(len(PREPARED)))
    with pytest.raises(ValueError, match="shape"):
        runs(
            c,
            None,
            5,
            np.random.default_rng(1),
            spread=0.5,
            item_draws=np.zeros((RUNS, len(PREPARED) - 1)),
        )


POLICY = Policy(count=5, spread=0.5, value_weight=1.0)


def first_place_shares(
    item_draws: ItemDraws | None, banks: int, seed: int
) -> npt.NDArray[np.float64]:
    """How often each row of the pool is shown first, over every run of ``banks`` banks
    of one user."""
    rng = np.random.default_rng(seed)
    model = UserModel(
        np.random.default_rng(7).normal(0, 0.3, DIM).astype(np.float32),
        np.full(DIM, 0.02, np.float32),
    )
    counts = np.zeros(len(PREPARED))
    for _ in range(banks):
        every = pool_runs(
            PREPARED, model, POLICY, exclude=(), preferences={}, rng=rng, item_draws=item_draws
        )
        np.add.at(counts, every.rows[:, 0], 1)
    out: npt.NDArray[np.float64] = counts / counts.sum()
    return out


def test_banks_sharing_item_draws_show_what_banks_drawing_their_own_show() -> None:
    """The policy's distribution of the first place, over 600 banks: banks sharing item
    draws (8 banks each) against banks drawing their own, within sampling noise (0.01 to
    0.04 in total variation over seeds; two sets of banks drawing their own differ by
    0.01 to 0.03)."""
    shared = first_place_shares(ItemDraws(max_uses=8), 600, seed=11)
    own = first_place_shares(None, 600, seed=12)
    assert np.abs(shared - own).sum() < 0.08  # total variation, 38,400 runs each
    assert np.count_nonzero(shared) > 1  # the policy explores


def test_a_shared_draw_keeps_the_pools_rows_when_some_are_excluded() -> None:
    gone = PREPARED.pool.item_ids[:10]
    every = pool_runs(
        PREPARED,
        None,
        POLICY,
        exclude=gone,
        preferences={},
        rng=np.random.default_rng(4),
        item_draws=ItemDraws(),
    )
    shown = {PREPARED.pool.item_ids[int(r)] for r in every.rows.ravel()}
    assert shown
    assert not shown & set(gone)
