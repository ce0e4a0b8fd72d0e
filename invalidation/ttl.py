"""Layer 1: how long an edge entry lives (the segment cache key's TTL rules, plus a
settle window).

The TTL rules: 300 s for power users, 600 s for active users, 900 s otherwise, capped at 180 s
while the user's session is active (an interaction within the idle window).

The settle window is ours: an entry of a power or active user is keyed by their last
interactions and ranked from their embedding, but the embedding catches up with a click
only when the stream worker has applied it. An entry filled in the moments after a click
may be ranked from the embedding as it was before, so it lives only until the click has
had time to settle; the next request then fills from the updated embedding.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from protocol.segments import Segment, is_fine_grained

# An answer with no items (an empty catalog, filters nothing matches) is kept this long at
# most, TTL and stale-if-error together: a shop's first items must show within seconds,
# not when a 15-minute entry of nothing lapses.
EMPTY_ANSWER_TTL_S = 10.0


def entry_lifetime(ttl: float, stale_if_error_s: float, *, items: int) -> tuple[float, float]:
    """(fresh for, servable for) of an entry filled now with ``items`` items."""
    if items == 0:
        fresh = min(ttl, EMPTY_ANSWER_TTL_S)
        return fresh, fresh
    return ttl, ttl + stale_if_error_s


@dataclass(frozen=True)
class TtlPolicy:
    power_s: float = 300  # power users' answers change fastest
    active_s: float = 600
    casual_s: float = 900  # also new users
    session_cap_s: float = 180  # while the user is in an active session
    session_idle_s: float = 1800  # a session is active this long after an interaction
    settle_s: float = 2.0  # how long an interaction may take to reach the embedding

    def __post_init__(self) -> None:
        for field in fields(self):
            if getattr(self, field.name) <= 0:
                raise ValueError(f"{field.name} must be > 0 seconds")


def ttl_for(segment: Segment, *, since_interaction_s: float | None, policy: TtlPolicy) -> float:
    """Seconds an entry filled now may be served; ``since_interaction_s`` is the time since
    the user's last interaction (None: none known)."""
    if segment is Segment.POWER:
        ttl = policy.power_s
    elif segment is Segment.ACTIVE:
        ttl = policy.active_s
    else:
        ttl = policy.casual_s
    if since_interaction_s is None:
        return ttl
    since = max(0.0, since_interaction_s)
    if since < policy.session_idle_s:
        ttl = min(ttl, policy.session_cap_s)
    if is_fine_grained(segment) and since < policy.settle_s:
        ttl = min(ttl, policy.settle_s - since)
    return ttl
