"""The policy registry on the suite's Redis: versions, idempotent definitions, races."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from origin.exceptions import InvalidPolicyName
from origin.policies.registry import PolicyRegistry
from protocol import keys
from protocol.policies import CONFIGURED, Policy, PolicyConfig

pytestmark = pytest.mark.cluster


CONFIGURED_POLICY = Policy(CONFIGURED, "4", PolicyConfig())
A = PolicyConfig(exploration_weight=0.2)
B = PolicyConfig(exploration_weight=0.2, emotion_rules=True)


@pytest.fixture
def registry(redis: Redis) -> PolicyRegistry:
    return PolicyRegistry(redis, CONFIGURED_POLICY)


@pytest.mark.parametrize(
    ("configs", "versions", "created"),
    [
        ([A], ["1"], [True]),
        ([A, A], ["1", "1"], [True, False]),
        ([A, B], ["1", "2"], [True, True]),
        ([A, B, B, A], ["1", "2", "2", "3"], [True, True, False, True]),
        # the same knobs, given as an integer: the same configuration
        (
            [PolicyConfig(user_prior_scale=8.0), PolicyConfig(user_prior_scale=8)],
            ["1", "1"],
            [True, False],
        ),
    ],
)
async def test_a_changed_configuration_is_the_next_version(
    registry: PolicyRegistry, configs: list[PolicyConfig], versions: list[str], created: list[bool]
) -> None:
    answers = [await registry.define("b", c) for c in configs]
    assert [p.version for p, _ in answers] == versions
    assert [c for _, c in answers] == created
    stored = await registry.versions("b")
    assert [p.version for p in stored] == sorted(set(versions), key=int)
    newest = await registry.get("b")
    assert newest is not None
    assert newest.version == versions[-1]


async def test_versions_are_read_back_as_defined(registry: PolicyRegistry) -> None:
    await registry.define("b", A)
    await registry.define("b", B)
    assert await registry.get("b", "1") == Policy("b", "1", A)
    assert await registry.get("b", "2") == Policy("b", "2", B)
    assert await registry.get("b", "3") is None
    assert await registry.get("b", "newest") is None
    assert await registry.get("nobody") is None
    assert await registry.versions("nobody") == []
    await registry.define("random", PolicyConfig(kind="random"))
    assert await registry.names() == [CONFIGURED, "b", "random"]


async def test_the_configured_policy_is_the_settings_not_stored(
    registry: PolicyRegistry, redis: Redis
) -> None:
    assert await registry.versions(CONFIGURED) == [CONFIGURED_POLICY]
    assert await registry.get(CONFIGURED) == CONFIGURED_POLICY
    assert await registry.get(CONFIGURED, "4") == CONFIGURED_POLICY
    assert await registry.get(CONFIGURED, "1") is None
    with pytest.raises(InvalidPolicyName):
        await registry.define(CONFIGURED, A)
    with pytest.raises(InvalidPolicyName):
        await registry.define("Not/A-Name", A)
    assert not await redis.exists(keys.policy(CONFIGURED), keys.POLICIES)


async def test_racing_definitions_take_distinct_versions(registry: PolicyRegistry) -> None:
    configs = [PolicyConfig(exploration_weight=n / 100) for n in range(20)]
    answers = await asyncio.gather(*(registry.define("b", c) for c in configs))
    assert sorted(int(p.version) for p, _ in answers) == list(range(1, 21))
    stored = {p.version: p.config for p in await registry.versions("b")}
    assert all(stored[p.version] == p.config for p, _ in answers)
