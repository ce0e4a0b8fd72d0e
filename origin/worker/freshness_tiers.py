"""Tiered freshness (seed 000 "Bottleneck 1: Embedding Staleness vs Compute Cost"): how long
the stream worker may hold a user's interactions before applying them, by how active the
user is (interactions applied in their current activity day).

- power (more than 10 a day): at once;
- active (3 to 10): within ``active_delay_s`` (seed: 5-minute batches);
- casual (fewer than 3): within ``casual_delay_s`` (seed: hourly).

The thresholds are the edge's segments (``protocol.segments``): casual users are served
segment-wide answers anyway, so an hourly embedding costs them nothing they can see.
Delays of 0 make every tier real-time.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.segments import Segment, segment_for


@dataclass(frozen=True)
class FreshnessPolicy:
    active_delay_s: float = 300.0
    casual_delay_s: float = 3600.0

    def delay_s(self, interactions_today: int) -> float:
        segment = segment_for(interactions_today, ever_seen=True)
        if segment == Segment.POWER:
            return 0.0
        if segment == Segment.ACTIVE:
            return self.active_delay_s
        return self.casual_delay_s


REAL_TIME = FreshnessPolicy(active_delay_s=0.0, casual_delay_s=0.0)
