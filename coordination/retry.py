"""How often and how long to wait for a held lock: capped exponential backoff, full jitter.

Full jitter (the AWS architecture blog's "Exponential Backoff and Jitter"): the n-th wait is
uniform in ``[0, min(max_delay, base_delay * multiplier**n))``, which spreads contenders
better than equal or no jitter. Three presets: fail fast, a default of 10 attempts, an
aggressive 50 attempts with shorter waits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from resilience.backoff import jittered, step


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``attempts`` tries in all (1: no retry), with jittered waits between them."""

    attempts: int
    base_delay_s: float
    max_delay_s: float
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("a retry policy needs at least one attempt")
        if self.base_delay_s < 0 or self.max_delay_s < self.base_delay_s:
            raise ValueError("delays must satisfy 0 <= base_delay_s <= max_delay_s")
        if self.multiplier < 1:
            raise ValueError("the backoff multiplier must be at least 1")


NO_RETRY = RetryPolicy(attempts=1, base_delay_s=0.0, max_delay_s=0.0)
# 100 ms initial backoff; 10 attempts wait at most ~4.3 s in all.
DEFAULT = RetryPolicy(attempts=10, base_delay_s=0.1, max_delay_s=1.0)
# Short critical sections under heavy contention: many short waits.
AGGRESSIVE = RetryPolicy(attempts=50, base_delay_s=0.01, max_delay_s=0.25, multiplier=1.5)


def delay_caps(policy: RetryPolicy) -> list[float]:
    """The upper bound of each wait between attempts (``attempts - 1`` of them)."""
    return [
        step(n, policy.base_delay_s, policy.max_delay_s, policy.multiplier)
        for n in range(policy.attempts - 1)
    ]


def delays(policy: RetryPolicy, rng: Callable[[], float]) -> list[float]:
    """The waits between attempts, full jitter over ``delay_caps`` (``resilience.backoff``);
    ``rng`` returns a uniform float in [0, 1) (``random.Random(seed).random`` in
    production)."""
    return [jittered(cap, rng(), "full") for cap in delay_caps(policy)]
