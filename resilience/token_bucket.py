"""The token bucket: ``rate`` calls a second on average, ``capacity`` at once.

One bucket serves every limit that counts calls in one process: the edge's per-user and
per-API-key rate limits (``edge.limits.rate_limit``), the edge's pre-warm budget and the LLM
gateway's ``llm_rate_per_s``. It is pure: every call says what time it is, read by the
caller from its injected clock, so one reading can serve several buckets and tests need no
fake clock at all.
"""

from __future__ import annotations

# Tokens a bucket may be short and still grant: a client that waits exactly the wait it was
# told must get in, though the clock's float arithmetic leaves it short by ~1e-15. One extra
# call per million is no loss of control.
SHORTFALL = 1e-6


class TokenBucket:
    """Holds up to ``capacity`` tokens (default: one second's worth, at least one), refilled
    at ``rate`` per second from full at ``now``."""

    __slots__ = ("_stamp", "_tokens", "capacity", "rate")

    def __init__(self, rate: float, now: float, capacity: float | None = None) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        self.rate = rate
        self.capacity = max(1.0, rate) if capacity is None else capacity
        if self.capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {self.capacity}")
        self._tokens = self.capacity
        self._stamp = now

    def tokens(self, now: float) -> float:
        """The tokens there at ``now``, fractions included."""
        # A clock that steps back must not take tokens away, nor give them twice later.
        if now > self._stamp:
            self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
        return self._tokens

    def wait_s(self, now: float, n: int = 1) -> float:
        """Seconds until ``n`` tokens are there (0.0: now), taking none."""
        if n > self.capacity:
            raise ValueError(f"{n} tokens can never fit a bucket of {self.capacity}")
        missing = n - self.tokens(now)
        return 0.0 if missing <= SHORTFALL else missing / self.rate

    def take(self, now: float, n: int = 1) -> float:
        """Takes ``n`` tokens and returns 0.0, or takes none and returns the seconds until
        they will be there."""
        wait = self.wait_s(now, n)
        if wait == 0.0:
            self._tokens -= n
        return wait
