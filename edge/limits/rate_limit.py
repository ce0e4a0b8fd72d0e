"""Token-bucket rate limits per user and per API key (the API's rate-limit tiers).

Every request takes one token from two buckets: its user's bucket for the endpoint (the
tier's per-user rate) and its API key's bucket for the endpoint (the tier's total rate, all
of that customer's users together). A bucket holds one second's worth of tokens (its rate,
at least one) unless the tier names a burst, so a client may burst that allowance at once
and then runs at the rate. Both buckets are checked before either is taken from: a request
refused by one costs nothing in the other, so a customer over its total does not also
drain its users' buckets.

These buckets are one edge process's: a client spread over N processes that keep their
own gets up to N times the limit. The processes of a PoP that share a store keep their
limits there instead (``edge.limits.pop_rate_limit``, the seed's "Redis-based distributed
counter"), and fall back on these buckets while it cannot be reached. The seed's "graceful
degradation on limit (return cached/popular)" is the caller's choice, made from the
``Decision``.

Memory is bounded: users' buckets live in an LRU of ``max_users`` entries, and a user
forgotten there simply starts again with a full bucket (the API keys' buckets likewise,
``max_api_keys``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Literal

from protocol.tiers import LIMITS, Tier, TierLimit
from resilience.token_bucket import TokenBucket

Scope = Literal["user", "total"]


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    # Seconds until the same request would be allowed; 0.0 when it is.
    retry_after_s: float
    # Which limit refused it; None when allowed.
    scope: Scope | None


_ALLOWED = Decision(allowed=True, retry_after_s=0.0, scope=None)


class _Buckets:
    """Buckets by key, at most ``max_size`` of them, the least recently used forgotten."""

    def __init__(self, max_size: int) -> None:
        if max_size < 1:
            raise ValueError(f"max_size must be >= 1, got {max_size}")
        self._max_size = max_size
        self._buckets: OrderedDict[Hashable, TokenBucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def get(
        self, key: Hashable, rate: float, now: float, capacity: float | None = None
    ) -> TokenBucket:
        bucket = self._buckets.get(key)
        # A new rate (the key's tier changed) takes effect at once, from a full bucket.
        if bucket is None or bucket.rate != rate:
            bucket = self._buckets[key] = TokenBucket(rate, now, capacity)
            if len(self._buckets) > self._max_size:
                self._buckets.popitem(last=False)
        self._buckets.move_to_end(key)
        return bucket


class RateLimiter:
    """The edge's limits: ``check()`` once per request. ``clock`` gives seconds, best
    ``time.monotonic`` (wall-clock time steps, and near 1.7e9 its floats are only 0.2 µs
    apart); ``limits`` replaces the seed's table (tests use small ones)."""

    def __init__(
        self,
        clock: Callable[[], float],
        max_users: int = 100_000,
        *,
        max_api_keys: int = 10_000,
        limits: Mapping[Tier, Mapping[str, TierLimit]] = LIMITS,
    ) -> None:
        self._clock = clock
        self._limits = limits
        self._users = _Buckets(max_users)
        self._totals = _Buckets(max_api_keys)

    @property
    def users_tracked(self) -> int:
        return len(self._users)

    def check(self, tier: Tier, endpoint: str, user_id: str, api_key_id: str) -> Decision:
        """Takes a token for the request from both its buckets, or from neither."""
        try:
            limit = self._limits[tier][endpoint]
        except KeyError:
            raise ValueError(f"no rate limit for tier {tier!r}, endpoint {endpoint!r}") from None
        now = self._clock()
        # User ids are the customer's own: the same id under two API keys is two users.
        user = self._users.get(
            (api_key_id, user_id, endpoint), limit.per_user_rps, now, limit.per_user_burst
        )
        total = self._totals.get((api_key_id, endpoint), limit.total_rps, now)
        user_wait = user.wait_s(now)
        total_wait = total.wait_s(now)
        if user_wait > 0 or total_wait > 0:
            # Both must have a token before the retry can pass: report the later one.
            scope: Scope = "user" if user_wait >= total_wait else "total"
            return Decision(allowed=False, retry_after_s=max(user_wait, total_wait), scope=scope)
        user.take(now)
        total.take(now)
        return _ALLOWED
