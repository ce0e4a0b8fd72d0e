"""The items' posteriors in Redis (``origin.learned.posteriors``) against the real server:
the ``ADD`` and ``READ`` scripts are atomic under concurrent writers, apply a decision's
outcomes once per mark, decay as the pure reference does, and keep the all-context rank."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from origin.learned.posteriors import (
    ALL_CONTEXTS,
    RANK_PRIOR_MEAN,
    ItemOutcome,
    PosteriorConfig,
    Posteriors,
    PosteriorStore,
    decayed,
)
from protocol import dedup, keys
from redis_client.client import RedisClient, open_client

pytestmark = pytest.mark.cluster

CELL = "mobile_evening"
NOW_MS = 1_767_225_600_000
NO_DECAY = PosteriorConfig(decay_half_life_s=0)


async def add(
    store: PosteriorStore,
    redis: RedisClient,
    mark: str,
    outcomes: Sequence[ItemOutcome],
    *,
    now_ms: int = NOW_MS,
    cells: Sequence[str] = (CELL, ALL_CONTEXTS),
) -> list[int]:
    """Queue one decision's outcomes and run them: 1 per cell applied, 0 per cell skipped."""
    async with redis.pipeline(transaction=False) as pipe:
        await store.queue_add(pipe, cells, mark, outcomes, now_ms)
        replies = await pipe.execute()
    return [int(r) for r in replies]


def pairs(p: Posteriors) -> list[tuple[float, float]]:
    return list(zip(p.alpha.tolist(), p.beta.tolist(), strict=True))


async def test_concurrent_writers_lose_no_increment(redis_url: str, redis: RedisClient) -> None:
    writers, per_writer = 16, 25
    clients = [await open_client(redis_url) for _ in range(writers)]
    try:
        stores = [PosteriorStore(client, NO_DECAY) for client in clients]

        async def write(w: int) -> None:
            for k in range(per_writer):
                outcome = ItemOutcome("it-000001", 0.25, 0.75)
                assert await add(stores[w], clients[w], f"r-{w}-{k}", [outcome]) == [1, 1]

        await asyncio.gather(*(write(w) for w in range(writers)))
        stored = await stores[0].read(CELL, ["it-000001"])
        cell, everywhere = stored.cell, stored.everywhere
    finally:
        for client in clients:
            await client.aclose()
    n = writers * per_writer
    for p in (cell, everywhere):
        assert pairs(p) == [(pytest.approx(1 + 0.25 * n), pytest.approx(1 + 0.75 * n))]
        assert p.observed.tolist() == [True]
        assert p.updated_ms.tolist() == [NOW_MS]


async def test_a_decision_is_applied_once_per_cell_however_often_it_is_sent(
    redis: RedisClient,
) -> None:
    store = PosteriorStore(redis, NO_DECAY)
    outcomes = [ItemOutcome("it-1", 1.0, 0.0), ItemOutcome("it-2", 0.0, 0.4)]
    assert await add(store, redis, "r-1", outcomes) == [1, 1]
    again = await asyncio.gather(*(add(store, redis, "r-1", outcomes) for _ in range(10)))
    assert again == [[0, 0]] * 10
    for cell in (CELL, ALL_CONTEXTS):
        assert pairs(await store.read_cell(cell, ["it-1", "it-2"])) == [
            (2.0, 1.0),
            (1.0, pytest.approx(1.4)),
        ]
    # the marks are per cell: the same mark in another cell is another decision's
    assert await add(store, redis, "r-1", outcomes, cells=["tablet_night"]) == [1]
    assert 0 < await redis.ttl(dedup.bandit_applied(CELL, "r-1")) <= dedup.BANDIT_APPLIED_TTL_S
    # one cell named twice is added to once
    assert await add(store, redis, "r-2", outcomes[:1], cells=[ALL_CONTEXTS, ALL_CONTEXTS]) == [1]
    assert pairs(await store.read_cell(ALL_CONTEXTS, ["it-1"])) == [(3.0, 1.0)]
    # an unknown context cell ("") teaches all contexts only
    assert await add(store, redis, "r-3", outcomes[:1], cells=["", ALL_CONTEXTS]) == [1]
    assert pairs(await store.read_cell(ALL_CONTEXTS, ["it-1"])) == [(4.0, 1.0)]
    assert not await redis.exists(keys.bandit_posteriors(""))


async def test_nothing_to_add_sends_nothing(redis: RedisClient) -> None:
    store = PosteriorStore(redis, NO_DECAY)
    assert await add(store, redis, "r-1", []) == []
    assert not await redis.exists(dedup.bandit_applied(CELL, "r-1"))


@pytest.mark.parametrize(
    ("engagements", "failures", "expected"),
    [(-0.5, 1.0, (1.0, 2.0)), (1.0, -2.0, (2.0, 1.0)), (0.0, 0.3, (1.0, 1.3))],
    ids=["negative-engagements", "negative-failures", "weighted-failure"],
)
async def test_a_negative_count_adds_nothing(
    redis: RedisClient, engagements: float, failures: float, expected: tuple[float, float]
) -> None:
    store = PosteriorStore(redis, NO_DECAY)
    await add(store, redis, "r-1", [ItemOutcome("it-1", engagements, failures)])
    assert pairs(await store.read_cell(CELL, ["it-1"])) == [pytest.approx(expected)]


async def test_decay_toward_the_prior_matches_the_reference(redis: RedisClient) -> None:
    config = PosteriorConfig(decay_half_life_s=3600)
    store = PosteriorStore(redis, config)
    for k in range(10):
        await add(store, redis, f"r-a{k}", [ItemOutcome("it-1", 1.0, 0.0)])
    stored = await store.read_cell(CELL, ["it-1"])
    assert pairs(stored) == [(11.0, 1.0)]
    two_hours_later = NOW_MS + 7_200_000
    # what ranking reads two hours later is what the next write starts from
    reference = decayed(stored, two_hours_later, config)
    assert pairs(reference) == [(pytest.approx(1 + 10 / 4), pytest.approx(1.0))]
    await add(store, redis, "r-b", [ItemOutcome("it-1", 0.0, 1.0)], now_ms=two_hours_later)
    after = await store.read_cell(CELL, ["it-1"])
    assert after.alpha.tolist() == pytest.approx(reference.alpha.tolist())
    assert after.beta.tolist() == pytest.approx((reference.beta + 1).tolist())
    assert after.updated_ms.tolist() == [two_hours_later]


async def test_unknown_items_and_cells_read_as_the_prior(redis: RedisClient) -> None:
    store = PosteriorStore(redis, PosteriorConfig(prior_alpha=2.0, prior_beta=3.0))
    stored = await store.read("tv_night", ["a", "b", "c"])
    cell, everywhere = stored.cell, stored.everywhere
    for p in (cell, everywhere):
        assert pairs(p) == [(2.0, 3.0)] * 3
        assert not p.observed.any()
    assert pairs(await store.read_cell("tv_night", [])) == []


async def test_reads_return_each_items_own_posterior_in_the_order_asked(redis: RedisClient) -> None:
    store = PosteriorStore(redis, NO_DECAY)
    items = [f"it-{k:06d}" for k in range(40)]
    await add(
        store,
        redis,
        "r-1",
        [ItemOutcome(item, (k % 5) / 4, 1.0) for k, item in enumerate(items)],
        cells=[CELL],
    )
    asked = [*reversed(items), "missing"]
    stored = await store.read(CELL, np.array(asked, dtype=object))
    cell, everywhere = stored.cell, stored.everywhere
    for position, item in enumerate(reversed(items)):
        k = items.index(item)
        assert cell.alpha[position] == pytest.approx(1 + (k % 5) / 4)
        assert cell.beta[position] == 2.0
    assert cell.observed.tolist() == [True] * 40 + [False]
    assert not everywhere.observed.any()  # only the cell was written


async def test_tens_of_thousands_of_items_are_read_in_one_call(redis: RedisClient) -> None:
    """A worker closing a backlog of joins reads every shown item's rate at once (8
    partitions x 200 joins x 10 items): more than Lua's unpack takes in one go."""
    store = PosteriorStore(redis, NO_DECAY)
    items = [f"it-{k:06d}" for k in range(20_000)]
    written = items[::997]
    await add(store, redis, "r-1", [ItemOutcome(i, 1.0, 0.0) for i in written], cells=[CELL])
    stored = await store.read_cell(CELL, items)
    assert len(stored.alpha) == len(items)
    assert np.flatnonzero(stored.observed).tolist() == list(range(0, len(items), 997))
    assert stored.alpha[stored.observed].tolist() == [2.0] * len(written)


async def test_a_damaged_row_reads_as_the_prior_and_is_overwritten(redis: RedisClient) -> None:
    store = PosteriorStore(redis, NO_DECAY)
    await redis.hset(keys.bandit_posteriors(CELL), "it-1", b"\x00" * 7)
    assert not (await store.read_cell(CELL, ["it-1"])).observed.any()
    await add(store, redis, "r-1", [ItemOutcome("it-1", 1.0, 0.0)], cells=[CELL])
    assert pairs(await store.read_cell(CELL, ["it-1"])) == [(2.0, 1.0)]


async def test_the_all_context_cell_ranks_its_items_by_a_cautious_rate(redis: RedisClient) -> None:
    config = NO_DECAY
    store = PosteriorStore(redis, config)
    # one lucky click vs a steady record: the steady one ranks first
    await add(store, redis, "r-1", [ItemOutcome("lucky", 1.0, 0.0)])
    for k in range(40):
        await add(store, redis, f"r-s{k}", [ItemOutcome("steady", 1.0 if k % 4 == 0 else 0.0, 1.0)])
    await add(store, redis, "r-2", [ItemOutcome("shunned", 0.0, 5.0)])
    assert await store.top(10) == ["steady", "lucky", "shunned"]
    assert await store.top(1) == ["steady"]
    strength = config.rank_prior_strength
    score = await redis.zscore(keys.bandit_rank(ALL_CONTEXTS), "lucky")
    assert score == pytest.approx((1 + strength * RANK_PRIOR_MEAN) / (1 + strength))
    # a context cell keeps no rank
    assert not await redis.exists(keys.bandit_rank(CELL))


async def test_the_rank_of_nothing_learnt_is_empty(redis: RedisClient) -> None:
    assert await PosteriorStore(redis, NO_DECAY).top(5) == []


async def test_the_all_context_cell_keeps_what_engagements_are_worth(redis: RedisClient) -> None:
    store = PosteriorStore(redis, NO_DECAY)
    # a click and a purchase on "bought"; two clicks on "clicked"; "ignored" only failed
    await add(store, redis, "r-1", [ItemOutcome("bought", 1.0, 0.0, 0.25)])
    await add(store, redis, "r-2", [ItemOutcome("bought", 1.0, 0.0, 1.0)])
    await add(store, redis, "r-3", [ItemOutcome("clicked", 2.0, 0.0, 0.5)])
    await add(store, redis, "r-4", [ItemOutcome("ignored", 0.0, 3.0)])
    # a replayed decision changes nothing
    assert await add(store, redis, "r-2", [ItemOutcome("bought", 1.0, 0.0, 1.0)]) == [0, 0]
    values = (await store.read(CELL, ["bought", "clicked", "ignored", "unseen"])).values
    assert values.engagements.tolist() == [2.0, 2.0, 0.0, 0.0]
    assert values.grades.tolist() == [1.25, 0.5, 0.0, 0.0]
    relative = values.relative(NOW_MS, NO_DECAY)
    assert relative[0] > 1.0  # worth more than a click
    assert relative[1:].tolist() == pytest.approx([1.0, 1.0, 1.0])
    # a context cell keeps no values
    assert not await redis.exists(keys.bandit_values(CELL))


async def test_a_better_grade_alone_changes_the_value_not_the_posterior(redis: RedisClient) -> None:
    store = PosteriorStore(redis, NO_DECAY)
    await add(store, redis, "r-1", [ItemOutcome("it-1", 1.0, 0.0, 0.25)])
    # a purchase after the close counted the click: the difference of grades, no engagement
    await add(store, redis, "i-late", [ItemOutcome("it-1", 0.0, 0.0, 0.75)], cells=[ALL_CONTEXTS])
    stored = await store.read(CELL, ["it-1"])
    assert pairs(stored.everywhere) == [(2.0, 1.0)]
    assert stored.values.engagements.tolist() == [1.0]
    assert stored.values.grades.tolist() == [1.0]


async def test_values_decay_with_the_posteriors_half_life(redis: RedisClient) -> None:
    config = PosteriorConfig(decay_half_life_s=3600)
    store = PosteriorStore(redis, config)
    await add(store, redis, "r-1", [ItemOutcome("it-1", 1.0, 0.0, 1.0)])
    hour_later = NOW_MS + 3_600_000
    await add(store, redis, "r-2", [ItemOutcome("it-1", 1.0, 0.0, 0.25)], now_ms=hour_later)
    values = (await store.read(CELL, ["it-1"])).values
    assert values.engagements.tolist() == pytest.approx([1.5])
    assert values.grades.tolist() == pytest.approx([0.75])
