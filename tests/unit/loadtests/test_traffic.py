from __future__ import annotations

import random
from collections import Counter

import pytest

from loadtests.traffic import ACTIVITY, Traffic, activity_pools, make_population, mean_wait_s
from protocol.api import FeedbackRequest, PersonalizeRequest

REGIONS = ["us-east", "eu-west", "ap-south"]


def test_population_is_deterministic_and_spread_over_regions() -> None:
    a = make_population(900, REGIONS, seed=4)
    assert a == make_population(900, REGIONS, seed=4)
    assert a != make_population(900, REGIONS, seed=5)
    assert Counter(u.region for u in a) == dict.fromkeys(REGIONS, 300)


def test_activity_mix_follows_the_seed() -> None:
    users = make_population(6000, REGIONS, seed=1)
    shares = Counter(u.activity for u in users)
    assert shares["casual"] / 6000 == pytest.approx(ACTIVITY["casual"][0], abs=0.03)


def test_active_users_request_more_often() -> None:
    users = make_population(3000, REGIONS, seed=1)
    traffic = Traffic(users)
    rng = random.Random(0)
    picks = Counter(traffic.next_user(rng).activity for _ in range(20_000))
    per_user = {a: picks[a] / sum(1 for u in users if u.activity == a) for a in ACTIVITY}
    assert per_user["power"] > per_user["active"] > per_user["casual"]


def test_bodies_are_valid_api_requests() -> None:
    users = make_population(50, REGIONS, seed=2)
    traffic = Traffic(users)
    rng = random.Random(1)
    items = [{"item_id": f"it-{n}"} for n in range(20)]
    feedback_seen = 0
    for _ in range(300):
        user = traffic.next_user(rng)
        PersonalizeRequest.model_validate(Traffic.personalize_body(user, rng))
        body = Traffic.feedback_body(user, items, rng, "r-1")
        if body is not None:
            feedback_seen += 1
            FeedbackRequest.model_validate(body)
    assert 0 < feedback_seen < 300


def test_no_feedback_without_items() -> None:
    user = make_population(1, REGIONS, seed=1)[0]
    assert all(Traffic.feedback_body(user, [], random.Random(n), "r") is None for n in range(50))


@pytest.mark.parametrize(
    ("activity", "casual_rps", "mean_s"),
    [
        ("casual", 0.5, 2.0),
        ("active", 0.5, 2.0 / 3),
        ("power", 0.5, 0.25),
        ("power", 2.0, 1 / 16),
    ],
)
def test_mean_wait_follows_the_activity_rate(
    activity: str, casual_rps: float, mean_s: float
) -> None:
    assert mean_wait_s(activity, casual_rps) == pytest.approx(mean_s)


def test_mean_wait_needs_a_positive_pace() -> None:
    with pytest.raises(ValueError, match="casual_rps must be > 0"):
        mean_wait_s("casual", 0)


def test_activity_pools_split_the_population_by_region_and_activity() -> None:
    users = make_population(600, REGIONS, seed=3)
    pools = activity_pools(users)
    assert set(pools) == {(r, a) for r in REGIONS for a in ACTIVITY}
    assert Counter(u for pool in pools.values() for u in pool) == Counter(users)
    assert all(u.region == r and u.activity == a for (r, a), pool in pools.items() for u in pool)
