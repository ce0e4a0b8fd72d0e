"""Tiered freshness, embedding staleness traded for compute: how long
the stream worker may defer a user's interactions before applying them, by how active the
user is (interactions applied in their current activity day), when it is overloaded.

- power (more than 10 a day): at once;
- active (3 to 10): within ``active_delay_s`` (seed: 5-minute batches);
- casual (fewer than 3): within ``casual_delay_s`` (seed: hourly).

The seed makes this the steady state; here it is what a worker does only while it is
behind: while the entries it reads are at least ``overload_lag_s`` old (their stream id's
time against the worker's clock), it defers active and casual users' interactions for their
tier and applies power users' at once; once it has caught up, it applies what it defers, a
batch's worth of users before each read. In the steady state every user's feedback reaches
their model within a batch: every user of whom anything is known is ranked by their own
model, casual users included, and an hour's delay would keep them from learning at all
(measured on ``benchmarks.learning``: the tiers deferring through the run left the product at
random's regret). ``overload_lag_s`` 0 makes the tiers the steady state again, as in the seed;
delays of 0 make every tier real-time even when behind.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.segments import Segment, segment_for


@dataclass(frozen=True)
class FreshnessPolicy:
    active_delay_s: float = 300.0
    casual_delay_s: float = 3600.0
    # The tiers defer only while the worker is at least this far behind (seconds of stream
    # time); 0: always.
    overload_lag_s: float = 10.0

    def delay_s(self, interactions_today: int) -> float:
        segment = segment_for(interactions_today, ever_seen=True)
        if segment == Segment.POWER:
            return 0.0
        if segment == Segment.ACTIVE:
            return self.active_delay_s
        return self.casual_delay_s

    def defers(self, lag_s: float) -> bool:
        """Whether the tiers defer interactions when the worker is ``lag_s`` behind."""
        if self.active_delay_s <= 0 and self.casual_delay_s <= 0:
            return False
        return lag_s >= self.overload_lag_s


REAL_TIME = FreshnessPolicy(active_delay_s=0.0, casual_delay_s=0.0)
