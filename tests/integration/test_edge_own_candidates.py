"""A known user's own candidates at the edge (issue 29, item 3): the catalog's vectors read
at start, the items nearest the user's model retrieved at the edge, their rows asked of the
origin in the background and ranked beside the segment's pool; catalog changes reaching the
vectors through the sync stream. The real origin and edge apps in process, the suite's
Redis between them."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import numpy as np
import pytest
from pydantic import SecretStr
from redis.asyncio import Redis

from config.settings import Settings
from edge.cache.entry import Entry
from edge.cache.key import pool_cache_key, variant
from edge.ranking.own_candidates import OwnCandidates
from origin.learned.posteriors import ALL_CONTEXTS
from protocol import keys
from protocol.api import PersonalizeRequest
from protocol.segments import Segment
from relevance.user_model import UserModel, model_bytes
from sync.messages import UserUpdate
from sync.publisher import SyncPublisher
from tests.integration.test_edge_api import applied, body
from tests.integration.test_edge_ranking import Stack, running, set_model
from tests.integration.test_own_catalog import own_item

ADMIN = {"authorization": "Bearer own-candidates-admin"}
POOL_SIZE = 40  # of the 500-item sample catalog: most items are outside the pool


@asynccontextmanager
async def own_stack(settings: Settings, redis: Redis, gather_s: float) -> AsyncIterator[Stack]:
    settings = settings.model_copy(
        update={
            "pool_size": POOL_SIZE,
            "edge_own_candidates": 50,
            "edge_own_candidates_gather_s": gather_s,
            "admin_token": SecretStr(ADMIN["authorization"].removeprefix("Bearer ")),
        }
    )
    async with running(settings) as stack:
        await asyncio.wait_for(own_of(stack).vectors.settled(), 10)
        await seen(stack, redis)
        yield stack


@pytest.fixture
async def stack(origin_settings: Settings, redis: Redis) -> AsyncIterator[Stack]:
    """Rows asked for as soon as a draw finds them missing (no gathering)."""
    async with own_stack(origin_settings, redis, gather_s=0) as stack:
        yield stack


async def seen(stack: Stack, redis: Redis) -> None:
    """Every item shown and engaged with before, over all contexts: a user's own candidates
    are those the shop has evidence on (an unseen one is explored in the segment's pool)."""
    index = stack.origin_app.state.origin.index
    row = struct.pack("<3d", 2.0, 40.0, stack.clock() * 1000)
    await redis.hset(
        keys.bandit_posteriors(ALL_CONTEXTS), mapping={str(i): row for i in index.item_ids}
    )


def own_of(stack: Stack) -> OwnCandidates:
    own = stack.node.own_candidates
    assert own is not None
    return own


async def aimed(stack: Stack, redis: Redis, user_id: str, item_id: str) -> None:
    """``user_id``'s model set to point at ``item_id`` (a strong, certain model)."""
    index = stack.origin_app.state.origin.index
    await set_model(redis, user_id, 12 * index.vectors[index.row_of[item_id]])


async def held_for(stack: Stack, redis: Redis, user_id: str, row: int) -> tuple[str, OwnCandidates]:
    """``user_id``'s model aimed at the catalog's item ``row``, one request of theirs
    ranked, and the rows it found missing come: the item, and the own candidates."""
    target = str(stack.origin_app.state.origin.index.item_ids[row])
    await aimed(stack, redis, user_id, target)
    await stack.ask(user_id)
    own = own_of(stack)
    await own.settled()
    return target, own


async def pool_entry(stack: Stack, segment: Segment = Segment.POWER, **parts: Any) -> Entry:
    """The entry of ``segment``'s pool the edge holds for requests like ``parts``."""
    key = pool_cache_key(
        segment=segment.value,
        device="mobile",
        variant_parts=variant(PersonalizeRequest(**body("x", **parts))),
    )
    entry = await stack.node.store.get(key)
    assert entry is not None
    assert entry.pool is not None
    return entry


async def pool_ids(stack: Stack, segment: Segment = Segment.POWER, **parts: Any) -> set[str]:
    """The items of ``segment``'s pool the edge holds for requests like ``parts``."""
    entry = await pool_entry(stack, segment, **parts)
    assert entry.pool is not None
    return set(entry.pool.item_ids)


async def test_unseen_items_are_not_ranked_as_own_candidates(stack: Stack, redis: Redis) -> None:
    index = stack.origin_app.state.origin.index
    await redis.delete(keys.bandit_posteriors(ALL_CONTEXTS))  # nothing seen
    await aimed(stack, redis, "ann", str(index.item_ids[123]))
    await stack.ask("ann")
    own = own_of(stack)
    await own.settled()
    assert own.counters.rows_fetched > 0
    again, _ = await stack.ask("ann")
    pool = await pool_ids(stack)
    assert {i.item_id for i in again.items} <= pool
    assert own.counters.joined == 0


async def test_the_edge_holds_the_catalogs_vectors_from_start(stack: Stack) -> None:
    own = own_of(stack)
    index = stack.origin_app.state.origin.index
    assert len(own.vectors) == len(index) == 500
    assert own.vectors.loaded
    assert own.vectors.nbytes < 500 * 200  # int8, 132 bytes an item and the lists
    # what the edge finds nearest an item's own vector is that item, first
    item = str(index.item_ids[7])
    assert own.vectors.nearest(index.vectors[7], 5)[0] == item


async def test_a_users_own_candidates_are_asked_for_once_then_ranked(
    stack: Stack, redis: Redis
) -> None:
    index = stack.origin_app.state.origin.index
    target = str(index.item_ids[123])
    await aimed(stack, redis, "ann", target)
    first, _ = await stack.ask("ann")
    pool = await pool_ids(stack)
    assert target not in pool  # 40 of 500: the segment's pool does not hold it
    assert first.metadata.tier == "edge"
    # the first draw found them missing: asked for in the background, the answer not held
    own = own_of(stack)
    await asyncio.wait_for(own.settled(), 10)
    assert own.counters.fetches == 1
    assert own.counters.rows_fetched > 0
    calls = stack.network.calls
    again, _ = await stack.ask("ann")
    assert again.metadata.tier == "edge"
    assert stack.network.calls == calls  # nothing asked on the request's path
    outside = [i for i in again.items if i.item_id not in pool]
    assert outside, "the user's own candidates are ranked beside the pool"
    assert all(i.source in {"collaborative", "exploration"} for i in outside)
    nearest = set(own.vectors.nearest(index.vectors[123], 50))
    assert {i.item_id for i in outside} <= nearest
    assert target in {i.item_id for i in again.items}  # the item the model points at
    assert own.counters.joined >= 1
    metrics = (await stack.client.get("/metrics")).text
    assert 'perso_edge_item_vectors{region="us-east"} 500.0' in metrics
    assert 'perso_edge_own_candidates_total{region="us-east",what="fetch"} 1.0' in metrics


async def test_another_users_draw_asks_only_for_what_is_not_held(
    stack: Stack, redis: Redis
) -> None:
    index = stack.origin_app.state.origin.index
    await aimed(stack, redis, "ann", str(index.item_ids[123]))
    await aimed(stack, redis, "bob", str(index.item_ids[123]))
    await stack.ask("ann")
    own = own_of(stack)
    await own.settled()
    fetched = own.counters.rows_fetched
    await stack.ask("bob")  # the same tastes: every row is held already
    await own.settled()
    assert own.counters.fetches == 1
    assert own.counters.rows_fetched == fetched


async def test_the_rows_held_outlive_the_pools_refills(
    stack: Stack, redis: Redis, origin_settings: Settings
) -> None:
    """Held per pool, not per fill: a refill of the pool (a minute apart at the default
    TTL) asks for none of the rows held again, only for those of the items the refilled
    pool no longer holds."""
    target, own = await held_for(stack, redis, "ann", 123)
    generation = (await pool_entry(stack)).generation
    first_pool = await pool_ids(stack)
    [extension] = own._extensions.values()
    assert extension.rows is not None
    held = set(extension.rows.pool.item_ids)
    stack.clock.tick(origin_settings.edge_pool_ttl_s + 1)
    for _ in range(3):  # the refill may land in the background
        answer, _ = await stack.ask("ann")
        await own.settled()
    assert (await pool_entry(stack)).generation != generation
    assert list(own._extensions.values()) == [extension]
    # asked for again: none; asked for since: only what the refilled pool no longer holds
    assert extension.rows is not None
    since = set(extension.rows.pool.item_ids) - held
    assert since <= first_pool
    assert own.counters.rows_fetched == len(extension.rows) == len(held) + len(since)
    assert target in {i.item_id for i in answer.items}


async def test_a_catalog_change_of_a_held_item_asks_for_it_again(
    stack: Stack, redis: Redis
) -> None:
    target, own = await held_for(stack, redis, "ann", 123)
    fetched = own.counters.rows_fetched
    stack.node.catalog_changed(2, (target,))
    answer, _ = await stack.ask("ann")  # ranked without it: its row is not current
    assert target not in {i.item_id for i in answer.items}
    await own.settled()
    assert own.counters.fetches == 2
    assert own.counters.rows_fetched == fetched + 1
    [extension] = own._extensions.values()
    assert extension.rows is not None
    assert extension.rows.pool.item_ids.count(target) == 1  # replaced, not added
    again, _ = await stack.ask("ann")
    assert target in {i.item_id for i in again.items}
    stack.node.catalog_changed(3, None)  # the whole catalog: every row asked again
    assert len(own) == 0


async def test_the_rows_held_are_shared_by_the_segments_pools(stack: Stack, redis: Redis) -> None:
    """Rows are held per context cell and what the constraints allow, not per pool: a user
    of another segment (another pool, the same cell) with the same tastes asks for none."""
    index = stack.origin_app.state.origin.index
    await aimed(stack, redis, "ann", str(index.item_ids[123]))
    await aimed(stack, redis, "bob", str(index.item_ids[123]))
    await stack.ask("ann", Segment.POWER)
    own = own_of(stack)
    await own.settled()
    fetched = own.counters.rows_fetched
    await stack.ask("bob", Segment.ACTIVE, constraints={"count": 5})
    await own.settled()
    assert len(own) == 1
    # what the active segment's pool holds and the power segment's did not was asked for
    active = await pool_ids(stack, Segment.ACTIVE, constraints={"count": 5})
    assert own.counters.rows_fetched - fetched <= len(await pool_ids(stack) - active)
    answer, _ = await stack.ask("bob", Segment.ACTIVE, constraints={"count": 5})
    assert str(index.item_ids[123]) in {i.item_id for i in answer.items}


async def test_what_draws_find_missing_is_gathered_into_one_call(
    origin_settings: Settings, redis: Redis
) -> None:
    """Rows missing for users of different tastes, found within the gathering time, are
    asked for in one call."""
    async with own_stack(origin_settings, redis, gather_s=0.3) as stack:
        index = stack.origin_app.state.origin.index
        for user, row in (("ann", 123), ("bob", 321), ("cid", 42)):
            await aimed(stack, redis, user, str(index.item_ids[row]))
            await stack.ask(user)
        own = own_of(stack)
        assert own.counters.fetches == 0  # still gathering
        await asyncio.wait_for(own.settled(), 10)
        assert own.counters.fetches == 1
        for user, row in (("ann", 123), ("bob", 321), ("cid", 42)):
            answer, _ = await stack.ask(user)
            assert str(index.item_ids[row]) in {i.item_id for i in answer.items}


async def test_own_candidates_keep_to_the_requests_categories(stack: Stack, redis: Redis) -> None:
    index = stack.origin_app.state.origin.index
    target_row = 123
    await aimed(stack, redis, "ann", str(index.item_ids[target_row]))
    category = str(index.items[target_row].category)
    other = next(c for c in sorted({i.category for i in index.items}) if c != category)
    constraints = {"count": 10, "categories": [other]}
    await stack.ask("ann", constraints=constraints)
    await own_of(stack).settled()
    answer, _ = await stack.ask("ann", constraints=constraints)
    slugs = {stack.category_slug(i.item_id) for i in answer.items}
    assert slugs == {other}


async def test_an_item_out_of_stock_is_not_ranked_until_sent_again(
    stack: Stack, redis: Redis
) -> None:
    target, own = await held_for(stack, redis, "ann", 123)
    assert target in {i.item_id for i in (await stack.ask("ann"))[0].items}
    async with httpx.AsyncClient(transport=stack.network, base_url="http://origin") as origin:
        changed = await origin.post(
            "/v1/admin/catalog/items",
            json=[own_item(target, 2, availability="out_of_stock")],
            headers=ADMIN,
        )
    assert changed.status_code == 200, changed.text
    await applied(stack.app, 2)  # its purge, and the catalog change
    for _ in range(3):
        answer, _ = await stack.ask("ann")
        await own.settled()
        assert target not in {i.item_id for i in answer.items}


async def test_catalog_changes_reach_the_edges_vectors(stack: Stack) -> None:
    own = own_of(stack)
    index = stack.origin_app.state.origin.index
    gone = str(index.item_ids[5])
    async with httpx.AsyncClient(transport=stack.network, base_url="http://origin") as origin:
        added = await origin.post(
            "/v1/admin/catalog/items", json=[own_item("sku-new-1")], headers=ADMIN
        )
        assert added.status_code == 200, added.text
        deleted = await origin.post(
            "/v1/admin/catalog/items:delete", json={"item_ids": [gone]}, headers=ADMIN
        )
        assert deleted.status_code == 200, deleted.text
    await applied(stack.app, 3)
    await asyncio.wait_for(own.vectors.settled(), 10)
    held = set(own.vectors.nearest(np.ones(index.dim, np.float32), 10_000))
    assert "sku-new-1" in held
    assert gone not in held
    assert len(own.vectors) == 500
    fresh = stack.origin_app.state.origin.index
    new_vector = fresh.vectors[fresh.row_of["sku-new-1"]]
    assert own.vectors.nearest(new_vector, 1) == ["sku-new-1"]


async def test_rows_the_origin_cannot_send_now_are_asked_again_later(
    stack: Stack, redis: Redis, origin_settings: Settings
) -> None:
    """The user's model moves (pushed by the stream) while the origin is down: the draw
    finds rows missing, the call for them fails, the answer comes from the pool all the
    same, and the rows are wanted again."""
    index = stack.origin_app.state.origin.index
    await aimed(stack, redis, "ann", str(index.item_ids[300]))
    await stack.ask("ann")
    own = own_of(stack)
    await own.settled()
    moved = UserModel(12 * index.vectors[42], np.full(index.dim, 1e-3, np.float32))
    publisher = SyncPublisher(redis, origin_settings.regions, stack.clock)
    await publisher.publish([UserUpdate("ann", 7, model=model_bytes(moved))])
    await applied(stack.app, 1)
    [extension] = own._extensions.values()
    asked_before = set(extension.asked)
    stack.network.down = True
    answer, _ = await stack.ask("ann")
    await own.settled()
    assert answer.metadata.tier == "edge"
    assert own.counters.fetch_failures == 1
    # what the failed call asked for is wanted again: not counted as asked
    assert extension.asked == asked_before
    assert own.counters.missing > 0
