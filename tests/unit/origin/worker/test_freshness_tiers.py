from __future__ import annotations

import pytest

from origin.worker.freshness_tiers import REAL_TIME, FreshnessPolicy


@pytest.mark.parametrize(
    ("interactions_today", "delay_s"),
    [(0, 3600.0), (1, 3600.0), (2, 3600.0), (3, 300.0), (10, 300.0), (11, 0.0), (500, 0.0)],
    ids=["none", "one", "casual-max", "active-min", "active-max", "power-min", "power"],
)
def test_seed_tiers(interactions_today: int, delay_s: float) -> None:
    assert FreshnessPolicy().delay_s(interactions_today) == delay_s


@pytest.mark.parametrize("interactions_today", [0, 2, 5, 11])
def test_real_time_for_everybody(interactions_today: int) -> None:
    assert REAL_TIME.delay_s(interactions_today) == 0.0


@pytest.mark.parametrize(
    ("policy", "lag_s", "defers"),
    [
        (FreshnessPolicy(), 0.0, False),  # caught up: nobody's feedback waits
        (FreshnessPolicy(), 9.9, False),
        (FreshnessPolicy(), 10.0, True),  # behind: the tiers hold
        (FreshnessPolicy(overload_lag_s=0), 0.0, True),  # the seed's steady state
        (REAL_TIME, 3600.0, False),  # no delays: nothing is ever deferred
    ],
    ids=["caught-up", "nearly-behind", "behind", "seed-tiers", "real-time"],
)
def test_the_tiers_hold_only_while_the_worker_is_behind(
    policy: FreshnessPolicy, lag_s: float, defers: bool
) -> None:
    assert policy.defers(lag_s) is defers
