"""Policies' wire forms: the registry's configuration and the pointer's policy."""

from __future__ import annotations

import pytest

from protocol.exceptions import MalformedMessage
from protocol.policies import (
    Policy,
    PolicyConfig,
    decode_config,
    decode_policy,
    encode_config,
    encode_policy,
)

CONFIGS = [
    PolicyConfig(),
    PolicyConfig("random"),
    PolicyConfig("ranker", 0.0, 1.0, True, 1e-3),
]


@pytest.mark.parametrize("config", CONFIGS)
def test_configurations_and_policies_round_trip(config: PolicyConfig) -> None:
    assert decode_config(encode_config(config)) == config
    policy = Policy("ranker-b", "12", config)
    assert decode_policy(encode_policy(policy)) == policy


def test_equal_configurations_encode_alike() -> None:
    assert encode_config(PolicyConfig(user_prior_scale=8)) == encode_config(
        PolicyConfig(user_prior_scale=8.0)
    )
    assert encode_config(PolicyConfig(emotion_rules=True)) != encode_config(PolicyConfig())


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"[]", "JSON object"),
        (b"{", "not a policy configuration"),
        (b'{"exploration_weight": 2}', "exploration_weight"),
        (b'{"kind": "bandit"}', "kind"),
        (b'{"temperature": 1}', "temperature"),
    ],
)
def test_a_damaged_configuration_names_its_problem(raw: bytes, says: str) -> None:
    with pytest.raises(MalformedMessage, match=says):
        decode_config(raw)
