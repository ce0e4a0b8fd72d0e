"""The Lua posterior and context-weight updates against the real Redis: atomic under
concurrent writers, idempotent per interaction, equal to the pure reference."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from redis.asyncio import Redis

from origin.bandit import BanditConfig, beta_update, gradient_step
from origin.context_features import FEATURES
from origin.posterior_store import Observation, PosteriorStore

SEGMENT = "mobile_evening"
NOW_MS = 1_767_225_600_000


def observation(ix: str, item: str = "it-000001", reward: float = 0.3) -> Observation:
    features = np.linspace(-1, 1, FEATURES, dtype=np.float32)
    return Observation(ix, item, SEGMENT, reward, features)


async def test_concurrent_writers_lose_no_increment(redis_url: str, redis: Redis) -> None:
    config = BanditConfig(decay_half_life_s=0)
    writers = 16
    per_writer = 25
    clients = [Redis.from_url(redis_url) for _ in range(writers)]
    try:
        stores = [PosteriorStore(client, config) for client in clients]

        async def write(w: int) -> None:
            for k in range(per_writer):
                await stores[w].apply([observation(f"ix-{w}-{k}")], NOW_MS)

        await asyncio.gather(*(write(w) for w in range(writers)))
        posteriors, _ = await stores[0].read(SEGMENT, ["it-000001"])
    finally:
        for client in clients:
            await client.aclose()
    n = writers * per_writer
    assert posteriors.alpha[0] == pytest.approx(1 + 0.3 * n, abs=1e-9)
    assert posteriors.beta[0] == pytest.approx(1 + 0.7 * n, abs=1e-9)
    assert bool(posteriors.observed[0]) is True


async def test_an_interaction_is_applied_once_however_often_it_is_sent(redis: Redis) -> None:
    store = PosteriorStore(redis, BanditConfig(decay_half_life_s=0))
    first = await store.apply([observation("ix-1", reward=1.0)], NOW_MS)
    again = await asyncio.gather(
        *(store.apply([observation("ix-1", reward=1.0)], NOW_MS) for _ in range(10))
    )
    assert first == 1
    assert again == [0] * 10
    posteriors, _ = await store.read(SEGMENT, ["it-000001"])
    assert (posteriors.alpha[0], posteriors.beta[0]) == (2.0, 1.0)


@pytest.mark.parametrize(
    ("action_reward", "expected"),
    [(-0.2, (1.0, 2.0)), (1.7, (2.0, 1.0)), (0.5, (1.5, 1.5))],
    ids=["negative-is-a-failure", "above-one-is-one", "half"],
)
async def test_rewards_are_clipped_into_the_unit_interval(
    redis: Redis, action_reward: float, expected: tuple[float, float]
) -> None:
    store = PosteriorStore(redis, BanditConfig(decay_half_life_s=0))
    await store.apply([observation("ix-1", reward=action_reward)], NOW_MS)
    posteriors, _ = await store.read(SEGMENT, ["it-000001"])
    assert (posteriors.alpha[0], posteriors.beta[0]) == pytest.approx(expected)


async def test_decay_toward_the_prior_matches_the_reference(redis: Redis) -> None:
    config = BanditConfig(decay_half_life_s=3600)
    store = PosteriorStore(redis, config)
    for k in range(10):
        await store.apply([observation(f"ix-a{k}", reward=1.0)], NOW_MS)
    two_hours_later = NOW_MS + 7_200_000
    await store.apply([observation("ix-b", reward=0.0)], two_hours_later)
    posteriors, _ = await store.read(SEGMENT, ["it-000001"])
    expected = beta_update(11.0, 1.0, 0.0, age_s=7200, config=config)
    assert (posteriors.alpha[0], posteriors.beta[0]) == pytest.approx(expected)
    assert posteriors.updated_ms[0] == two_hours_later


async def test_context_weights_follow_the_online_gradient_step(redis: Redis) -> None:
    config = BanditConfig(learning_rate=0.05)
    store = PosteriorStore(redis, config)
    expected = np.zeros(FEATURES, np.float32)
    rewards = [1.0, 0.0, 0.3, 1.0, 0.1]
    for k, reward in enumerate(rewards):
        o = observation(f"ix-{k}", item=f"it-{k:06d}", reward=reward)
        await store.apply([o], NOW_MS)
        expected = gradient_step(expected, o.features, reward, config.learning_rate)
    _, weights = await store.read(SEGMENT, ["it-000000"])
    np.testing.assert_allclose(weights, expected, atol=1e-5)
    assert float(np.abs(weights).sum()) > 0


async def test_unknown_items_and_segments_read_as_the_prior(redis: Redis) -> None:
    store = PosteriorStore(redis, BanditConfig(prior_alpha=2.0, prior_beta=3.0))
    posteriors, weights = await store.read("tv_night", ["a", "b", "c"])
    assert posteriors.alpha.tolist() == [2.0, 2.0, 2.0]
    assert posteriors.beta.tolist() == [3.0, 3.0, 3.0]
    assert not posteriors.observed.any()
    assert weights.shape == (FEATURES,)
    assert not weights.any()


async def test_read_returns_each_items_own_posterior_across_shards(redis: Redis) -> None:
    store = PosteriorStore(redis, BanditConfig(decay_half_life_s=0))
    items = [f"it-{k:06d}" for k in range(40)]
    await store.apply(
        [observation(f"ix-{k}", item=item, reward=(k % 5) / 4) for k, item in enumerate(items)],
        NOW_MS,
    )
    posteriors, _ = await store.read(SEGMENT, [*reversed(items), "missing"])
    for position, item in enumerate(reversed(items)):
        k = items.index(item)
        assert posteriors.alpha[position] == pytest.approx(1 + (k % 5) / 4)
    assert bool(posteriors.observed[-1]) is False
