"""The product as ``benchmarks.learning`` drives it: a stack of real processes holding the
simulated shop's catalog and nothing else, slates asked of the edge (or of the origin's own
API), outcomes told to the same path as the shop reports them, and what it was told
reaching the decision log and the workers."""

from __future__ import annotations

import asyncio
from collections import Counter

import numpy as np
import pytest
from redis.asyncio import Redis

from benchmarks.click_model import Outcome
from benchmarks.perso_policy import PersoConfig, PersoPolicy, started
from benchmarks.shop_world import Request, ShopWorld, WorldConfig, make_world, requests
from protocol import keys
from protocol.decisions import DECISION_FIELD, decode_entry
from protocol.events import EVENT_FIELD, decode_event

pytestmark = pytest.mark.e2e

# A clicks-only shop: it never reports a dismiss, a cart or a purchase, whatever happened.
CLICKS_ONLY = WorldConfig(items=300, users=12, feedback="clicks", popularity_noise=None)


async def serve_and_tell(policy: PersoPolicy, world: ShopWorld, served: list[Request]) -> None:
    """Every request asked; the user clicks the first item, carts it and dismisses the last."""
    known = set(world.catalog.item_ids)
    for request in served:
        slate = await policy.slate(request)
        assert len(slate) == request.count
        assert len(set(slate)) == len(slate)
        assert set(slate) <= known  # the shop's own items only, never sample ones
        first = np.zeros(len(slate), bool)
        first[0] = True
        last = np.zeros(len(slate), bool)
        last[-1] = True
        await policy.learn(request, slate, Outcome(first, first, first, last))
    assert policy.errors == 0


async def logged_and_learnt(policy: PersoPolicy, served: list[Request]) -> Counter[str]:
    """Wait until every answer is a logged decision and every user's record is written
    (asserted); the actions in the event streams."""
    redis = Redis.from_url(policy.redis_url)
    partitions = policy.settings.event_partitions
    try:
        for _ in range(150):
            entries = [await redis.xrange(s) for s in keys.decisions_streams(partitions)]
            logged = sum(
                len(decode_entry(fields[DECISION_FIELD]))
                for stream in entries
                for _, fields in stream
            )
            users = [await redis.get(keys.user_record(r.user_id)) for r in served]
            if logged >= len(served) and all(users):
                break
            await asyncio.sleep(0.1)
        assert logged >= len(served)  # every answer served is a decision
        assert all(users)  # every user's feedback reached their model
        events = [await redis.xrange(s) for s in keys.events_streams(partitions)]
        return Counter(
            decode_event(fields[EVENT_FIELD]).action for stream in events for _, fields in stream
        )
    finally:
        await redis.aclose()


async def test_the_edge_path_serves_the_worlds_items_and_hears_what_the_shop_reports() -> None:
    world = make_world(CLICKS_ONLY, 5)
    served = requests(world, 24, 5)
    policy = await started(world, PersoConfig(overrides={"reward_wait_s": 1.0}))
    try:
        await serve_and_tell(policy, world, served)
        actions = await logged_and_learnt(policy, served)
        assert policy.sent == Counter(click=len(served))  # no dismiss, cart or purchase sent
        assert set(actions) == {"click"}
        assert policy.configuration()["path"] == "edge"
    finally:
        await policy.aclose()


async def test_the_origin_path_is_ranked_and_logged_by_the_origin() -> None:
    world = make_world(CLICKS_ONLY, 6)
    served = requests(world, 24, 6)
    config = PersoConfig(path="origin", overrides={"reward_wait_s": 1.0})
    policy = await started(world, config, name="perso_origin")
    try:
        await serve_and_tell(policy, world, served)
        actions = await logged_and_learnt(policy, served)
        assert policy.sent == Counter(click=len(served))
        assert set(actions) == {"click"}
        configuration = policy.configuration()
        assert configuration["path"] == "origin"
        assert configuration["overrides"] == {"reward_wait_s": 1.0}
        assert configuration["settings"]["reward_wait_s"] == 1.0
    finally:
        await policy.aclose()
