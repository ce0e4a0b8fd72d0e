from __future__ import annotations

import dataclasses
import random
from collections import Counter

import pytest

from benchmarks.hit_ratio import (
    INTERACTION,
    INTERACTIONS_PER_DAY,
    NEW,
    REQUEST,
    WARMUP_S,
    make_users,
    schedule,
    session,
    sessions_per_day,
    user_events,
    visitor_count,
    zipf_cum_weights,
    zipf_rank,
)
from loadtests.traffic import ACTIVITY, make_population

DAY_S = 86_400.0


@pytest.mark.parametrize(("s", "first_over_second"), [(0.0, 1.0), (1.0, 2.0), (1.5, 2**1.5)])
def test_zipf_weights_fall_as_a_power_of_the_rank(s: float, first_over_second: float) -> None:
    cum = zipf_cum_weights(100, s)
    assert len(cum) == 100
    assert cum[0] / (cum[1] - cum[0]) == pytest.approx(first_over_second)


def test_zipf_sampler_follows_the_distribution() -> None:
    n, draws = 1000, 60_000
    cum = zipf_cum_weights(n, 1.0)
    rng = random.Random(3)
    ranks = Counter(zipf_rank(rng, cum) for _ in range(draws))
    assert min(ranks) >= 1
    assert max(ranks) <= n
    harmonic = cum[-1]
    for rank in (1, 2, 10):
        assert ranks[rank] / draws == pytest.approx(1 / rank / harmonic, rel=0.1)
    # The head is heavy: the top 1% of ranks draw about 39% of the picks (H_10 / H_1000).
    top = sum(ranks[r] for r in range(1, 11)) / draws
    assert top == pytest.approx(cum[9] / harmonic, abs=0.02)


def test_zipf_needs_a_rank() -> None:
    with pytest.raises(ValueError, match="n must be"):
        zipf_cum_weights(0, 1.0)


@pytest.mark.parametrize(
    ("count", "hours", "share", "expected"),
    [
        (50_000, 3.0, 0.0, 0),
        (50_000, 3.0, 0.10, 2278),
        (50_000, 24.0, 0.10, 13_816),
        (1000, 3.0, 0.5, 300),
    ],
)
def test_visitors_make_their_share_of_the_visits(
    count: int, hours: float, share: float, expected: int
) -> None:
    visitors = visitor_count(count, hours, share)
    assert visitors == expected
    per_known_user = hours / 24 * sum(ACTIVITY[c][0] * sessions_per_day(c) for c in ACTIVITY)
    known_visits = (count - visitors) * per_known_user
    if visitors:
        assert visitors / (visitors + known_visits) == pytest.approx(share, abs=0.01)


@pytest.mark.parametrize("share", [-0.1, 1.0])
def test_visitor_share_is_a_fraction(share: float) -> None:
    with pytest.raises(ValueError, match="new_share"):
        visitor_count(100, 3.0, share)


def test_user_mix_follows_seed_000_and_the_demo_model() -> None:
    users = make_users(20_000, seed=5, hours=3.0)
    classes = Counter(u.activity for u in users)
    assert classes[NEW] == visitor_count(20_000, 3.0, 0.10)
    known = len(users) - classes[NEW]
    for activity, (share, _, _) in ACTIVITY.items():
        assert classes[activity] / known == pytest.approx(share, abs=0.02)
    assert classes["casual"] / known == pytest.approx(0.30, abs=0.02)  # seed 000
    assert len({u.user_id for u in users}) == len(users)


@pytest.mark.parametrize("activity", list(INTERACTIONS_PER_DAY))
def test_interactions_a_day_fall_in_the_seed_ranges(activity: str) -> None:
    user = dataclasses.replace(make_population(1, ["us-east"], seed=1)[0], activity=activity)
    rng = random.Random(9)
    cum = zipf_cum_weights(1000, 1.0)
    users, days = 40, 20
    interactions = sum(
        kind == INTERACTION
        for _ in range(users)
        for _, kind, _ in user_events(user, rng, 0.0, days * DAY_S, cum)
    )
    low, high = INTERACTIONS_PER_DAY[activity]
    assert interactions / users / days == pytest.approx((low + high) / 2, rel=0.15)


def test_an_interaction_comes_before_the_next_page_view() -> None:
    rng = random.Random(2)
    cum = zipf_cum_weights(100, 1.0)
    for n in range(200):
        events = session(rng, float(n), chance=0.6, cum_weights=cum)
        assert events[0] == (float(n), REQUEST, -1)
        assert [t for t, _, _ in events] == sorted(t for t, _, _ in events)
        assert all(item >= 1 for _, kind, item in events if kind == INTERACTION)


def test_schedule_is_determined_by_its_seed() -> None:
    users = make_users(300, seed=4, hours=1.0)
    events = schedule(users, seed=4, hours=1.0)
    assert events == schedule(users, seed=4, hours=1.0)
    assert events != schedule(users, seed=5, hours=1.0)
    assert events == sorted(events)
    assert all(t < 3600.0 for t, _, _, _ in events)
    assert all(t >= -WARMUP_S for t, kind, _, _ in events if kind == REQUEST)
    first_time = {n for n, u in enumerate(users) if u.activity == NEW}
    assert all(t >= 0 for t, _, n, _ in events if n in first_time)
