"""The product as ``benchmarks.learning`` drives it: a stack of real processes holding the
simulated shop's catalog and nothing else, slates asked of the edge, outcomes told to it,
and what it was told reaching the decision log and the workers."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from redis.asyncio import Redis

from benchmarks.click_model import Outcome
from benchmarks.perso_policy import PersoConfig, started
from benchmarks.shop_world import WorldConfig, make_world, requests
from protocol import keys
from protocol.decisions import DECISION_FIELD, decode_entry

pytestmark = pytest.mark.e2e


async def test_the_product_serves_the_worlds_items_and_learns_from_what_it_is_told() -> None:
    world = make_world(WorldConfig(items=300, users=12), 5)
    served = requests(world, 24, 5)
    policy = await started(world, PersoConfig(reward_wait_s=1.0))
    try:
        known = set(world.catalog.item_ids)
        for request in served:
            slate = await policy.slate(request)
            assert len(slate) == request.count
            assert len(set(slate)) == len(slate)
            assert set(slate) <= known  # the shop's own items only, never sample ones
            clicked = np.zeros(len(slate), bool)
            clicked[0] = True
            none = np.zeros(len(slate), bool)
            await policy.learn(request, slate, Outcome(clicked, none, none, none))
        assert policy.errors == 0
        redis = Redis.from_url(policy.redis_url)
        try:
            partitions = 8
            for _ in range(100):  # the edge flushes its decisions, the worker applies
                entries = [await redis.xrange(s) for s in keys.decisions_streams(partitions)]
                logged = sum(
                    len(decode_entry(fields[DECISION_FIELD]))
                    for stream in entries
                    for _, fields in stream
                )
                users = [await redis.get(keys.user_state(r.user_id)) for r in served]
                if logged >= len(served) and all(users):
                    break
                await asyncio.sleep(0.1)
            assert logged >= len(served)  # every answer served is a decision
            assert all(users)  # every user's clicks reached their model
        finally:
            await redis.aclose()
    finally:
        await policy.aclose()
