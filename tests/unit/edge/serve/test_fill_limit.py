"""The fill rate limit of ``/v1/personalize`` (``check_fill``): one check wherever a miss
would cost the origin work, each refusal counted once."""

from __future__ import annotations

from typing import cast

from edge.limits.rate_limit import Decision, RateLimiter
from edge.node import Edge, EdgeCounters
from edge.serve.personalize import check_fill
from protocol.tiers import FILL, Tier, TierLimit
from tests.fakes import FakeClock

# Two fills a second per user, at most three per API key.
LIMITS = {Tier.FREE: {FILL: TierLimit(per_user_rps=2, total_rps=3)}}


class _Edge:
    """The two things ``check_fill`` uses of an edge: its limits and its counters."""

    def __init__(self, clock: FakeClock) -> None:
        self.limiter = RateLimiter(clock, limits=LIMITS)
        self.counters = EdgeCounters()

    async def check_limit(self, tier: Tier, endpoint: str, user_id: str, key: str) -> Decision:
        return self.limiter.check(tier, endpoint, user_id, key)


async def test_a_refused_fill_is_counted_once_and_says_how_long() -> None:
    clock = FakeClock(0.0)
    stub = _Edge(clock)
    edge = cast(Edge, stub)
    assert (await check_fill(edge, Tier.FREE, "u", "k")).allowed
    assert (await check_fill(edge, Tier.FREE, "u", "k")).allowed
    assert stub.counters.fills_limited == 0
    refused = await check_fill(edge, Tier.FREE, "u", "k")
    assert refused == Decision(allowed=False, retry_after_s=0.5, scope="user")
    assert stub.counters.fills_limited == 1
    assert (await check_fill(edge, Tier.FREE, "v", "k")).allowed  # the key's third
    assert not (await check_fill(edge, Tier.FREE, "w", "k")).allowed  # the key's total
    assert stub.counters.fills_limited == 2
    clock.tick(0.5)
    assert (await check_fill(edge, Tier.FREE, "u", "k")).allowed
    assert stub.counters.fills_limited == 2
