"""User activity segments (seed 000 "Bottleneck 1: tiered freshness").

A user's segment comes from how many interactions they had in the last 24 hours:
power users (more than 10) are keyed and refreshed most finely, casual users (fewer than 3)
share coarse entries, and users never seen are ``new``.
"""

from __future__ import annotations

from enum import StrEnum


class Segment(StrEnum):
    NEW = "new"
    CASUAL = "casual"
    ACTIVE = "active"
    POWER = "power"


# Seed 000: power > 10 interactions/day, active 3-10, casual < 3.
POWER_MIN_PER_DAY = 11
ACTIVE_MIN_PER_DAY = 3


def segment_for(interactions_last_day: int, *, ever_seen: bool) -> Segment:
    """Segment of a user from their interaction count over the last 24 hours."""
    if interactions_last_day < 0:
        raise ValueError(f"interaction count must be >= 0, got {interactions_last_day}")
    if interactions_last_day >= POWER_MIN_PER_DAY:
        return Segment.POWER
    if interactions_last_day >= ACTIVE_MIN_PER_DAY:
        return Segment.ACTIVE
    if interactions_last_day > 0 or ever_seen:
        return Segment.CASUAL
    return Segment.NEW


# Least to most engaged.
_ENGAGEMENT = (Segment.NEW, Segment.CASUAL, Segment.ACTIVE, Segment.POWER)


def more_engaged(a: Segment, b: Segment) -> Segment:
    """The more engaged of two views of one user's segment."""
    return max(a, b, key=_ENGAGEMENT.index)


def is_fine_grained(segment: Segment) -> bool:
    """Whether entries for this segment are keyed by the user's recent interactions."""
    return segment in (Segment.POWER, Segment.ACTIVE)
