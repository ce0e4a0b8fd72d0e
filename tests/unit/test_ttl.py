from __future__ import annotations

import pytest

from invalidation.ttl import TtlPolicy, ttl_for
from protocol.segments import Segment

SEED = TtlPolicy()


@pytest.mark.parametrize(
    ("segment", "session_active", "ttl"),
    [
        (Segment.POWER, False, 300),
        (Segment.ACTIVE, False, 600),
        (Segment.CASUAL, False, 900),
        (Segment.NEW, False, 900),
        (Segment.POWER, True, 180),  # capped at 3 minutes during an active session
        (Segment.ACTIVE, True, 180),
        (Segment.CASUAL, True, 180),
    ],
)
def test_seed_ttls(segment: Segment, session_active: bool, ttl: int) -> None:
    assert ttl_for(segment, session_active=session_active, policy=SEED) == ttl


def test_cap_never_lengthens_a_ttl() -> None:
    policy = TtlPolicy(power_s=60, session_cap_s=180)
    assert ttl_for(Segment.POWER, session_active=True, policy=policy) == 60


def test_policy_rejects_non_positive_ttls() -> None:
    with pytest.raises(ValueError, match="power_s"):
        TtlPolicy(power_s=0)
