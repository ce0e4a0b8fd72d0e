"""GCRA, the generic cell rate algorithm: a token bucket kept as one number per key.

A limit of ``rate`` requests a second with a burst of ``capacity`` is kept as the key's
theoretical arrival time (TAT): when the bucket would be full again. Each request moves it
one ``interval`` (1 / rate) later, from now if it was in the past; a request fits while
the TAT it would leave is at most ``capacity`` intervals ahead of now, and otherwise waits
for the difference. That is exactly ``edge.limits.rate_limit.TokenBucket`` (tokens = capacity -
(TAT - now) / interval), but its whole state is one number, written only when a request is
let through: what a script in a shared Redis can check and take in one call
(``edge.limits.pop_rate_limit``, whose Lua mirrors these functions operation for operation so
that both compute the same doubles). Unlike the bucket, a clock that steps back makes a
GCRA key look fuller until it catches up: its one clock is the PoP store's.

Times are microseconds (floats: Redis's ``TIME`` in µs is below 2**53, so exact, and the
sub-µs part of an interval such as 1e6 / 3 is kept). Pure: the caller says what time it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from edge.limits.rate_limit import Decision, Scope

US = 1_000_000.0

# Tokens a key may be short and still grant, as the token bucket's: a client that waits
# exactly the retry_after it was told must get in despite float rounding.
SHORTFALL = 1e-6


@dataclass(frozen=True, slots=True)
class Rate:
    """One limit: ``interval_us`` per request, up to ``capacity`` requests at once."""

    interval_us: float
    capacity: float

    @classmethod
    def of(cls, rate: float, burst: float | None = None) -> Rate:
        """``rate`` per second with a burst of ``burst`` (None: one second's worth, at
        least one request), as ``edge.limits.rate_limit.TokenBucket``."""
        if rate <= 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        capacity = max(1.0, rate) if burst is None else float(burst)
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        return cls(US / rate, capacity)


def take(tat_us: float | None, now_us: float, rate: Rate) -> tuple[float, float]:
    """One request against a key whose TAT is ``tat_us`` (None: never seen, or expired):
    ``(the TAT it leaves, 0.0)`` when it fits, else ``(that TAT, µs to wait)``, in which
    case nothing is to be stored."""
    base = now_us if tat_us is None or tat_us < now_us else tat_us
    new = base + rate.interval_us
    over = new - now_us - rate.capacity * rate.interval_us
    if over <= SHORTFALL * rate.interval_us:
        return new, 0.0
    return new, over


@dataclass(frozen=True, slots=True)
class Taken:
    """A request checked against its user's and its API key's limits: the decision, and
    when allowed the TATs to store for both (None when refused: nothing is stored)."""

    decision: Decision
    user_tat_us: float | None = None
    total_tat_us: float | None = None


def take_both(
    user_tat_us: float | None,
    total_tat_us: float | None,
    now_us: float,
    *,
    user: Rate,
    total: Rate,
) -> Taken:
    """A request takes from both limits or from neither (as ``RateLimiter.check``): one
    refused by the total costs the user nothing, and the reverse. A refusal reports the
    later of the two waits, and the limit it comes from (the user's on a tie)."""
    user_new, user_wait = take(user_tat_us, now_us, user)
    total_new, total_wait = take(total_tat_us, now_us, total)
    if user_wait > 0 or total_wait > 0:
        scope: Scope = "user" if user_wait >= total_wait else "total"
        wait = max(user_wait, total_wait)
        return Taken(Decision(allowed=False, retry_after_s=wait / US, scope=scope))
    return Taken(Decision(allowed=True, retry_after_s=0.0, scope=None), user_new, total_new)
