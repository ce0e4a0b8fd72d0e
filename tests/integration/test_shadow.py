"""Shadow mode (``origin.offline.shadow``): a candidate policy runs beside the live one on
live requests, off their path; its would-be slates go to ``shadow:{p}``, and once the joins
close it is compared with the live policy on the rewards, in ``perso evaluate --shadow``'s
words and in ``/metrics``. Over HTTP against the real app, with a real worker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np
import pytest
from redis.asyncio import Redis

from config.settings import Settings
from evaluation.shadow import compare
from origin.offline.shadow import read_shadow, refresh
from origin.offline.window import records_of
from protocol import keys
from protocol.decisions import DECISION_FIELD
from protocol.shadows import decode_shadow
from tests.fakes import FakeClock
from tests.integration.test_learning_loop import written
from tests.integration.test_origin_learning import (
    EVENING,
    Served,
    feedback,
    personalize,
    running,
)

SHADOW = "greedy:exploration_weight=0"
USERS = [f"u-shadow-{n}" for n in range(6)]


@pytest.fixture
async def shadowed(origin_settings: Settings, redis: Redis) -> AsyncIterator[Served]:
    async with running(
        origin_settings,
        redis,
        FakeClock(EVENING),
        shadow_policy=SHADOW,
        shadow_rate=1.0,
        context_log_rate=0.0,
    ) as served:
        yield served


async def logged(served: Served, count: int) -> None:
    """Wait until the shadow has computed ``count`` samples and they are in Redis."""
    shadow = served.origin.shadow
    assert shadow is not None
    for _ in range(1000):
        if shadow.counters.logged >= count:
            break
        await asyncio.sleep(0.01)
    assert shadow.counters.logged >= count, shadow.counters
    assert served.origin.shadow_log is not None
    await written(served.origin.shadow_log)


async def test_a_shadow_logs_its_would_be_slates_and_is_compared_on_the_rewards(
    shadowed: Served, redis: Redis, origin_settings: Settings
) -> None:
    served_slates = {}
    for user in USERS:
        answer = await personalize(shadowed.client, user)
        served_slates[answer.request_id] = [item.item_id for item in answer.items]
        # Every user clicks the slate's first item.
        await feedback(
            shadowed.client,
            user,
            {"item_id": answer.items[0].item_id, "action": "click"},
            request_id=answer.request_id,
        )
    await logged(shadowed, len(USERS))

    records = []
    for p in range(origin_settings.event_partitions):
        for _, fields in await redis.xrange(keys.shadow_stream(p)):
            # An entry holds a flush's records of the partition, batched.
            entry = fields[DECISION_FIELD]
            assert isinstance(entry, bytes)
            records += [decode_shadow(raw) for raw in records_of(entry)]
    assert {r.request_id for r in records} == set(served_slates)
    for r in records:
        assert r.policy == "greedy/inline"
        assert r.live.startswith("configured/")
        assert list(r.shown) == served_slates[r.request_id]
        assert all(0 < p <= 1 for p in r.live_p)
        # Ranking by the means: one slate, each of its items surely where it is.
        assert len(r.would_show) == len(r.shown)
        assert set(r.would_p) == {1.0}
        assert all(p in (0.0, 1.0) for p in r.shadow_p)

    # Nothing to compare until the joins close.
    found, rewards = await read_shadow(redis, origin_settings.event_partitions, "greedy")
    assert len(found) == len(USERS)
    assert rewards == {}
    await shadowed.learn()
    shadowed.clock.tick(origin_settings.reward_wait_s + origin_settings.reward_grace_s + 1)
    await shadowed.worker.joins.close_due(int(shadowed.clock() * 1000))
    found, rewards = await read_shadow(redis, origin_settings.event_partitions, "greedy")
    assert set(rewards) == set(served_slates)
    comparison = compare(found, rewards, np.random.default_rng(0), samples=50)
    assert comparison is not None
    assert comparison.decisions == len(USERS)
    assert comparison.live_value == 1.0  # one click on every slate
    assert comparison.policy == "greedy/inline"

    # /metrics carries the counts at once and the comparison once it was refreshed.
    shadow = shadowed.origin.shadow
    assert shadow is not None
    await refresh(shadow, redis, origin_settings.event_partitions)
    text = (await shadowed.client.get("/metrics")).text
    assert f'perso_origin_shadow_sampled_total{{policy="greedy/inline"}} {len(USERS)}.0' in text
    assert (
        'perso_origin_shadow_live_engagement{live="configured/1",policy="greedy/inline"} 1.0'
        in (text)
    )
    assert "perso_origin_shadow_engagement{" in text


async def test_requests_with_their_own_exploration_are_neither_shadowed_nor_logged(
    origin_settings: Settings, redis: Redis
) -> None:
    # Ranked by the request's own options, not the live policy: a replay of the live policy
    # would not reproduce them, so no context and no shadow.
    async with running(
        origin_settings,
        redis,
        FakeClock(EVENING),
        shadow_policy=SHADOW,
        shadow_rate=1.0,
        context_log_rate=1.0,
    ) as served:
        await personalize(served.client, "u-own", options={"exploration_rate": 0.0})
        await personalize(served.client, "u-own", options={"diversity_weight": 0.5})
        shadow, contexts = served.origin.shadow, served.origin.contexts
        assert shadow is not None
        assert contexts is not None
        assert (shadow.counters.sampled, contexts.counters.logged) == (0, 0)
        await personalize(served.client, "u-own")
        assert (shadow.counters.sampled, contexts.counters.logged) == (1, 1)
