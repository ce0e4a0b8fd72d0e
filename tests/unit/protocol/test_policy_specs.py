"""Candidates written inline for ``perso evaluate`` (``protocol.policy_specs``)."""

from __future__ import annotations

import pytest

from protocol.exceptions import MalformedMessage
from protocol.policies import Policy, PolicyConfig
from protocol.policy_specs import INLINE_VERSION, REFERENCES, inline


@pytest.mark.parametrize(
    ("spec", "policy"),
    [
        ("random", REFERENCES["random"]),
        ("popular", REFERENCES["popular"]),
        ("plain", Policy("plain", INLINE_VERSION, PolicyConfig())),
        ("plain:", Policy("plain", INLINE_VERSION, PolicyConfig())),
        (
            "bold:exploration_weight=0.3",
            Policy("bold", INLINE_VERSION, PolicyConfig(exploration_weight=0.3)),
        ),
        (
            "rules-2:emotion_rules=TRUE, diversity_weight = 0.5,user_prior_scale=100",
            Policy(
                "rules-2",
                INLINE_VERSION,
                PolicyConfig(diversity_weight=0.5, emotion_rules=True, user_prior_scale=100.0),
            ),
        ),
        ("u:kind=random", Policy("u", INLINE_VERSION, PolicyConfig(kind="random"))),
        ("off:emotion_rules=false,", Policy("off", INLINE_VERSION, PolicyConfig())),
    ],
)
def test_a_good_spec(spec: str, policy: Policy) -> None:
    assert inline(spec) == policy


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("", "the name must be"),
        (":exploration_weight=0.1", "the name must be"),
        ("Bold:exploration_weight=0.1", "the name must be"),
        ("bold/2", "the name must be"),
        ("bold:exploration_weight", "'exploration_weight' is not knob=value"),
        ("bold:temperature=1", "'temperature' not a policy setting"),
        ("bold:exploration_weight=2", "'exploration_weight' is 2.0, expected 0 to 1"),
        ("bold:exploration_weight=high", "'exploration_weight' is not a number"),
        ("bold:exploration_weight=true", "'exploration_weight' is not a number"),
        ("bold:emotion_rules=1", "'emotion_rules' is not a boolean"),
        ("bold:kind=greedy", "'kind' is 'greedy'"),
    ],
)
def test_a_bad_spec_names_its_problem(spec: str, problem: str) -> None:
    with pytest.raises(MalformedMessage, match=problem):
        inline(spec)
