"""Ranking policies as data (``protocol.policies``): what keeps a document from being a
configuration, and the policy's strict JSON wire form."""

from __future__ import annotations

import json
from typing import Any

import pytest

from protocol.exceptions import MalformedMessage
from protocol.policies import (
    Policy,
    PolicyConfig,
    config_of,
    config_problems,
    decode_policy,
    encode_policy,
)


@pytest.mark.parametrize(
    ("doc", "problems"),
    [
        ({}, []),
        ({"kind": "random"}, []),
        ({"kind": "popular", "emotion_rules": True}, []),
        (
            {"exploration_weight": 0, "diversity_weight": 1, "user_prior_scale": 10_000},
            [],
        ),
        ({"user_prior_scale": 1e-3, "exploration_weight": 0.3}, []),
        ({"temperature": 0.5}, [("temperature", "not a policy setting")]),
        ({"name": "a"}, [("name", "not a policy setting")]),
        ({"kind": "bandit"}, [("kind", "is 'bandit', expected one of ranker, random, popular")]),
        ({"kind": None}, [("kind", "is None, expected one of ranker, random, popular")]),
        ({"exploration_weight": 1.5}, [("exploration_weight", "is 1.5, expected 0 to 1")]),
        ({"exploration_weight": -0.1}, [("exploration_weight", "is -0.1, expected 0 to 1")]),
        ({"diversity_weight": 2}, [("diversity_weight", "is 2, expected 0 to 1")]),
        (
            {"user_prior_scale": 0.0},
            [("user_prior_scale", "is 0.0, expected 0.001 to 10000")],
        ),
        (
            {"user_prior_scale": 1e5},
            [("user_prior_scale", "is 100000.0, expected 0.001 to 10000")],
        ),
        (
            {"exploration_weight": float("nan")},
            [("exploration_weight", "is nan, expected 0 to 1")],
        ),
        (
            {"user_prior_scale": float("inf")},
            [("user_prior_scale", "is inf, expected 0.001 to 10000")],
        ),
        ({"exploration_weight": True}, [("exploration_weight", "is not a number")]),
        ({"diversity_weight": False}, [("diversity_weight", "is not a number")]),
        ({"user_prior_scale": "32"}, [("user_prior_scale", "is not a number")]),
        ({"emotion_rules": 1}, [("emotion_rules", "is not a boolean")]),
        ({"emotion_rules": "true"}, [("emotion_rules", "is not a boolean")]),
        (
            {"kind": "x", "extra": 1, "exploration_weight": True, "emotion_rules": None},
            [
                ("extra", "not a policy setting"),
                ("kind", "is 'x', expected one of ranker, random, popular"),
                ("exploration_weight", "is not a number"),
                ("emotion_rules", "is not a boolean"),
            ],
        ),
    ],
)
def test_config_problems(doc: dict[str, Any], problems: list[tuple[str, str]]) -> None:
    assert config_problems(doc) == problems


def test_a_configuration_takes_defaults_for_missing_knobs_and_floats_for_numbers() -> None:
    config = config_of({"kind": "ranker", "diversity_weight": 1, "emotion_rules": True})
    assert config == PolicyConfig(diversity_weight=1.0, emotion_rules=True)
    assert type(config.diversity_weight) is float
    assert config_of({}) == PolicyConfig()


def test_a_configuration_with_problems_names_the_first() -> None:
    with pytest.raises(MalformedMessage, match="'exploration_weight' is 3, expected 0 to 1"):
        config_of({"exploration_weight": 3, "diversity_weight": 4})


@pytest.mark.parametrize(
    "policy",
    [
        Policy("configured", "1", PolicyConfig()),
        Policy("random", "ref", PolicyConfig(kind="random")),
        Policy(
            "bold-2",
            "2026-01-01",
            PolicyConfig(
                exploration_weight=0.3,
                diversity_weight=0.25,
                emotion_rules=True,
                user_prior_scale=100.0,
            ),
        ),
    ],
)
def test_round_trip(policy: Policy) -> None:
    raw = encode_policy(policy)
    assert decode_policy(raw) == policy
    assert decode_policy(raw.decode()) == policy
    assert json.loads(raw)["name"] == policy.name


def test_the_label_is_name_and_version() -> None:
    assert Policy("bold", "3", PolicyConfig()).label == "bold/3"


def policy_doc(**change: Any) -> str:
    d: dict[str, Any] = {"name": "bold", "version": "1", "kind": "ranker"}
    d.update(change)
    return json.dumps({k: v for k, v in d.items() if v is not ...})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{", "not a policy"),
        (b"\xff", "not a policy"),
        ("[1]", "a policy is a JSON object"),
        (policy_doc(name=...), "'name' is None"),
        (policy_doc(name=""), "'name' is ''"),
        (policy_doc(name="Bold"), "'name' is 'Bold', expected 1 to 64 of a-z"),
        (policy_doc(name="-bold"), "'name'"),
        (policy_doc(name="b" * 65), "'name'"),
        (policy_doc(name="bold/2"), "'name'"),
        (policy_doc(name=3), "'name' is 3"),
        (policy_doc(version=...), "'version' is None"),
        (policy_doc(version=""), "'version' is ''"),
        (policy_doc(version=1), "'version' is 1"),
        (policy_doc(kind="greedy"), "'kind' is 'greedy'"),
        (policy_doc(exploration_weight=2), "'exploration_weight' is 2"),
        (policy_doc(seed=1), "'seed' not a policy setting"),
    ],
)
def test_a_malformed_policy_is_refused_naming_the_field(raw: str | bytes, message: str) -> None:
    with pytest.raises(MalformedMessage, match=message):
        decode_policy(raw)
