"""User activity segments (the activity thresholds of tiered freshness).

A user's segment comes from how many interactions they had in the last 24 hours: power
users (more than 10), active (3 to 10), casual (fewer than 3, or none today but some
before), and ``new`` for users never seen. Segments shape cache lifetimes and key grain
(``invalidation.ttl``, ``edge.cache.key``); they never decide whether a user is ranked by
their own model: every user of whom anything is known (``is_known``) is, from their first
signal, and only ``new`` users share their segment's answer.
"""

from __future__ import annotations

from enum import StrEnum


class Segment(StrEnum):
    NEW = "new"
    CASUAL = "casual"
    ACTIVE = "active"
    POWER = "power"


# Tiered freshness: power > 10 interactions/day, active 3-10, casual < 3.
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
    """Whether this segment's answers live shortly after an interaction, until it settled
    in the user's model (``invalidation.ttl``): the most engaged users'."""
    return segment in (Segment.POWER, Segment.ACTIVE)


def is_known(segment: Segment) -> bool:
    """Whether anything is known of a user in this segment (a click, a dismiss, a model
    record): then they are ranked by their own model, whatever their activity."""
    return segment is not Segment.NEW
