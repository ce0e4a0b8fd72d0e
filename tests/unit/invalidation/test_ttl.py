from __future__ import annotations

import pytest

from invalidation.ttl import TtlPolicy, entry_lifetime, ttl_for
from protocol.segments import Segment

SEED = TtlPolicy()


@pytest.mark.parametrize(
    ("segment", "since", "ttl"),
    [
        # seed 001: by segment...
        (Segment.POWER, None, 300),
        (Segment.ACTIVE, None, 600),
        (Segment.CASUAL, None, 900),
        (Segment.NEW, None, 900),
        (Segment.POWER, 7200, 300),  # last interaction long ago: no active session
        # ...capped at 3 minutes during an active session
        (Segment.POWER, 60, 180),
        (Segment.ACTIVE, 1799, 180),
        (Segment.CASUAL, 60, 180),
        (Segment.ACTIVE, 1800, 600),  # idle for the whole window: session over
        # settle window: a fine-grained entry right after a click lives until it settles
        (Segment.POWER, 0.5, 1.5),
        (Segment.ACTIVE, 0.0, 2.0),
        (Segment.ACTIVE, -1.0, 2.0),  # clock skew counts as "just now"
        (Segment.POWER, 2.0, 180),
        (Segment.CASUAL, 0.5, 180),  # coarse entries do not come from the embedding
    ],
)
def test_ttl(segment: Segment, since: float | None, ttl: float) -> None:
    assert ttl_for(segment, since_interaction_s=since, policy=SEED) == pytest.approx(ttl)


def test_cap_never_lengthens_a_ttl() -> None:
    policy = TtlPolicy(power_s=60, session_cap_s=180)
    assert ttl_for(Segment.POWER, since_interaction_s=10, policy=policy) == 60


@pytest.mark.parametrize("name", ["power_s", "session_cap_s", "settle_s"])
def test_policy_rejects_non_positive_durations(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        TtlPolicy(**{name: 0})


@pytest.mark.parametrize(
    ("ttl", "stale_if_error_s", "items", "lifetime"),
    [
        (900, 3600, 20, (900, 4500)),
        (900, 3600, 0, (10, 10)),  # nothing to show: asked again within seconds
        (5, 3600, 0, (5, 5)),
        (300, 0, 1, (300, 300)),
    ],
)
def test_an_answer_with_no_items_is_kept_ten_seconds_at_most(
    ttl: float, stale_if_error_s: float, items: int, lifetime: tuple[float, float]
) -> None:
    assert entry_lifetime(ttl, stale_if_error_s, items=items) == lifetime
