"""What a policy makes of the ranking: its rules, the users' prior, its name."""

from __future__ import annotations

import numpy as np
import pytest

from config.settings import Settings, configured_policy
from origin.policies.live import LivePolicy, ranking_rules
from origin.policies.registry import name_problem
from protocol.policies import CONFIGURED, Policy, PolicyConfig
from relevance.user_model import UserModel


def settings(**fields: object) -> Settings:
    return Settings(**fields)  # type: ignore[arg-type]


def test_the_configured_policy_is_the_settings() -> None:
    configured = configured_policy(
        settings(
            exploration_weight=0.2,
            diversity_weight=0.4,
            emotion_rules=True,
            user_prior_scale=16.0,
            policy_version="7",
        )
    )
    assert configured == Policy(CONFIGURED, "7", PolicyConfig("ranker", 0.2, 0.4, True, 16.0))
    assert configured.label == "configured/7"


def test_the_rules_are_the_policys_knobs_and_the_settings_others() -> None:
    rules = ranking_rules(
        settings(value_weight=0.5, propensity_draws=9, exploration_weight=0.3),
        PolicyConfig(exploration_weight=0.05, diversity_weight=0.2, emotion_rules=True),
    )
    assert (rules.exploration_weight, rules.diversity_weight, rules.emotion) == (0.05, 0.2, True)
    assert (rules.value_weight, rules.propensity_draws) == (0.5, 9)


@pytest.mark.parametrize(("scale", "same"), [(32.0, True), (8.0, False), (128.0, False)])
def test_the_users_model_is_put_under_the_policys_prior(scale: float, same: bool) -> None:
    live = LivePolicy.of(
        settings(user_prior_scale=32.0), Policy("b", "1", PolicyConfig(user_prior_scale=scale))
    )
    model = UserModel(np.full(4, 0.5, np.float32), np.full(4, 2.0, np.float32))
    moved = live.user_model(model)
    assert moved is not None
    assert (moved is model) == same
    if scale < 32.0:  # a stronger prior: less certain of less
        assert (moved.var < model.var).all()
        assert (np.abs(moved.mean) < np.abs(model.mean)).all()
    assert live.user_model(None) is None


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("ranker-b", None),
        ("random", None),
        ("popular", None),
        ("a" * 64, None),
        ("a" * 65, "expected"),
        ("Ranker", "expected"),
        ("_b", "expected"),
        ("", "expected"),
        ("b/1", "expected"),
        (CONFIGURED, "settings configure"),
    ],
)
def test_which_names_can_be_defined(name: str, problem: str | None) -> None:
    found = name_problem(name)
    assert (found is None) == (problem is None)
    if problem is not None:
        assert found is not None
        assert problem in found
