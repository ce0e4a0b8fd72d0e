"""Layer 1: how long an edge entry lives (Algorithm 5's TTL rules)."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.segments import Segment


@dataclass(frozen=True)
class TtlPolicy:
    power_s: int = 300  # power users' answers change fastest
    active_s: int = 600
    casual_s: int = 900  # also new users
    session_cap_s: int = 180  # while the user is in an active session

    def __post_init__(self) -> None:
        for name in ("power_s", "active_s", "casual_s", "session_cap_s"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 second")


def ttl_for(segment: Segment, *, session_active: bool, policy: TtlPolicy) -> int:
    if segment is Segment.POWER:
        ttl = policy.power_s
    elif segment is Segment.ACTIVE:
        ttl = policy.active_s
    else:
        ttl = policy.casual_s
    if session_active:
        ttl = min(ttl, policy.session_cap_s)
    return ttl
