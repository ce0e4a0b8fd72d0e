from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt
import pytest

from edge.cache.prepared_pool import PreparedPool
from edge.ranking.live_posteriors import ALL_CONTEXTS, LivePosteriors
from relevance.item_posteriors import PosteriorConfig, Posteriors, effective
from tests.fakes import FakeClock
from tests.pools import make_pool

NOW_MS = 1_767_225_700_000.0
FILLED_MS = 1_767_225_600_000.0
CONFIG = PosteriorConfig(decay_half_life_s=0)


def stored_rows(n: int) -> npt.NDArray[np.float64]:
    """What the origin read when it filled the pool: a few impressions in the cell, more
    over all contexts; nothing stored for the last item."""
    rows = np.tile([1.5, 4.0, FILLED_MS, 3.0, 20.0, FILLED_MS], (n, 1))
    rows[-1] = 0.0
    return rows


def prepared(n: int = 12, *, with_stored: bool = True) -> PreparedPool:
    pool = make_pool(n, dim=4)
    stored = stored_rows(n) if with_stored else None
    return PreparedPool.of(dataclasses.replace(pool, stored=stored))


def expected(
    pool: PreparedPool, rows: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """What the origin ranks by, from ``rows``: the same arithmetic, computed directly."""
    return effective(
        Posteriors.from_rows(rows[:, :3], CONFIG),
        Posteriors.from_rows(rows[:, 3:], CONFIG),
        pool.category_codes,
        NOW_MS,
        CONFIG,
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


@pytest.fixture
def live(clock: FakeClock) -> LivePosteriors:
    return LivePosteriors(CONFIG, clock=clock)


def test_a_pool_nobody_changed_is_ranked_as_filled(live: LivePosteriors) -> None:
    pool = prepared()
    assert live.refreshed(pool, NOW_MS) is pool
    live.apply(ALL_CONTEXTS, ["not-in-the-pool"], [(2.0, 3.0, NOW_MS)])
    assert live.refreshed(pool, NOW_MS) is pool


def test_a_pool_without_stored_posteriors_is_ranked_as_filled(live: LivePosteriors) -> None:
    pool = prepared(with_stored=False)
    live.apply(ALL_CONTEXTS, [pool.pool.item_ids[0]], [(9.0, 3.0, NOW_MS)])
    assert live.refreshed(pool, NOW_MS) is pool


def test_streamed_rows_move_the_pool_as_the_origin_would_rank_it(
    live: LivePosteriors, clock: FakeClock
) -> None:
    pool = prepared()
    ids = pool.pool.item_ids
    cell = pool.pool.context
    live.apply(cell, [ids[0], ids[-1]], [(3.5, 9.0, NOW_MS), (1.0, 1.8, NOW_MS)])
    live.apply(ALL_CONTEXTS, [ids[0]], [(5.0, 40.0, NOW_MS)])
    now = live.refreshed(pool, NOW_MS)
    rows = stored_rows(len(pool))
    rows[0] = [3.5, 9.0, NOW_MS, 5.0, 40.0, NOW_MS]
    rows[-1, :3] = [1.0, 1.8, NOW_MS]
    alpha, beta = expected(pool, rows)
    assert now.terms.alpha == pytest.approx(alpha)
    assert now.terms.beta == pytest.approx(beta)
    assert not np.allclose(now.terms.alpha, pool.terms.alpha)  # the cold priors moved
    assert now.terms_version == pool.terms_version + 1
    # what depends on the vectors alone is the pool's, not computed again
    assert now.terms.__dict__["squares"] is pool.terms.__dict__["squares"]
    assert now.pool is pool.pool
    assert live.refreshed(pool, NOW_MS) is now  # kept while nothing changes


def test_a_row_older_than_the_one_held_or_the_fills_changes_nothing(
    live: LivePosteriors,
) -> None:
    pool = prepared()
    first = pool.pool.item_ids[0]
    live.apply(ALL_CONTEXTS, [first], [(5.0, 40.0, NOW_MS)])
    live.apply(ALL_CONTEXTS, [first], [(9.0, 9.0, NOW_MS - 1)])  # late: ignored
    now = live.refreshed(pool, NOW_MS)
    rows = stored_rows(len(pool))
    rows[0, 3:] = [5.0, 40.0, NOW_MS]
    assert now.terms.alpha == pytest.approx(expected(pool, rows)[0])
    other = LivePosteriors(CONFIG, clock=FakeClock(0))
    other.apply(ALL_CONTEXTS, [first], [(50.0, 50.0, FILLED_MS - 1)])  # before the fill
    as_stored = expected(pool, stored_rows(len(pool)))[0]
    assert other.refreshed(pool, NOW_MS).terms.alpha == pytest.approx(as_stored)


def test_a_pool_is_recomputed_at_most_every_refresh_interval(
    live: LivePosteriors, clock: FakeClock
) -> None:
    pool = prepared()
    ids = pool.pool.item_ids
    live.apply(ALL_CONTEXTS, [ids[1]], [(5.0, 40.0, NOW_MS)])
    first = live.refreshed(pool, NOW_MS)
    live.apply(ALL_CONTEXTS, [ids[2]], [(6.0, 40.0, NOW_MS)])
    clock.tick(0.1)
    assert live.refreshed(pool, NOW_MS) is first  # within the interval: as it was
    clock.tick(0.2)
    second = live.refreshed(pool, NOW_MS)
    assert second is not first
    assert second.terms_version == first.terms_version + 1
    assert live.recomputed == 2
    # a change to items of other pools does not recompute this one
    live.apply(ALL_CONTEXTS, ["elsewhere"], [(6.0, 40.0, NOW_MS)])
    clock.tick(1)
    assert live.refreshed(pool, NOW_MS) is second
    assert live.recomputed == 2


def test_the_table_keeps_the_most_recently_changed_rows(clock: FakeClock) -> None:
    live = LivePosteriors(CONFIG, clock=clock, max_rows=3)
    for k in range(5):
        live.apply(ALL_CONTEXTS, [f"it-{k}"], [(1.0, 2.0, NOW_MS)])
    assert len(live) == 3
    live.apply(ALL_CONTEXTS, ["it-2"], [(1.0, 3.0, NOW_MS + 1)])
    live.apply(ALL_CONTEXTS, ["it-9"], [(1.0, 3.0, NOW_MS + 1)])
    assert len(live) == 3
    assert live.applied == 7


def own_rows(n: int = 6) -> PreparedPool:
    """Items outside the pool, sent as rows of it: unseen but the first."""
    pool = make_pool(n, dim=4, seed=9)
    stored = np.zeros((n, 6))
    stored[0] = [2.0, 30.0, FILLED_MS, 4.0, 60.0, FILLED_MS]
    return PreparedPool.of(
        dataclasses.replace(pool, item_ids=tuple(f"own-{k}" for k in range(n)), stored=stored),
        vector_terms=False,
    )


def test_rows_beside_a_pool_take_their_cold_priors_from_both(
    live: LivePosteriors, clock: FakeClock
) -> None:
    base, rows = prepared(), own_rows()
    ranked = live.beside(rows, base, NOW_MS)
    joined = np.concatenate([base.pool.stored, rows.pool.stored])
    codes = {c: k for k, c in enumerate(base.categories)}
    theirs = [codes.setdefault(rows.categories[k], len(codes)) for k in rows.category_codes]
    alpha, beta = effective(
        Posteriors.from_rows(joined[:, :3], CONFIG),
        Posteriors.from_rows(joined[:, 3:], CONFIG),
        np.concatenate([base.category_codes, theirs]),
        NOW_MS,
        CONFIG,
    )
    np.testing.assert_allclose(ranked.terms.alpha, alpha[len(base) :])
    np.testing.assert_allclose(ranked.terms.beta, beta[len(base) :])
    # not the cold priors of the rows alone (their one observed item's rate)
    alone_alpha, _ = effective(
        Posteriors.from_rows(rows.pool.stored[:, :3], CONFIG),
        Posteriors.from_rows(rows.pool.stored[:, 3:], CONFIG),
        rows.category_codes,
        NOW_MS,
        CONFIG,
    )
    assert not np.allclose(ranked.terms.alpha[1:], alone_alpha[1:])
    # kept until a row changes, then recomputed with it, its version another
    assert live.beside(rows, base, NOW_MS) is ranked
    live.apply(ALL_CONTEXTS, ["own-3"], [(9.0, 12.0, NOW_MS)])
    clock.tick(1.0)
    again = live.beside(rows, base, NOW_MS)
    assert again.terms_version != ranked.terms_version
    assert again.terms.alpha[3] > ranked.terms.alpha[3]


def test_rows_without_stored_posteriors_are_ranked_as_sent(live: LivePosteriors) -> None:
    rows = own_rows()
    bare = PreparedPool.of(dataclasses.replace(rows.pool, stored=None))
    assert live.beside(bare, prepared(), NOW_MS) is bare
    assert live.beside(rows, prepared(with_stored=False), NOW_MS) is rows
