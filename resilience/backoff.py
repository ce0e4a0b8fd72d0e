"""Back-off between retries: capped exponential steps, and the jitter that spreads them.

Every retry loop of the product waits by these rules, so that they are written (and
tested) once. A step grows geometrically and is capped::

    step(n) = min(cap, base * multiplier**n)        n = 0 for the first retry

and a jitter strategy turns the step into a wait, from a uniform draw ``u`` in [0, 1)
that the caller supplies (an injected ``random.Random``), as in the AWS architecture
blog's "Exponential Backoff and Jitter":

- ``none``: the step itself (one process retrying alone: a worker reconnecting);
- ``full``: uniform in [0, step] (many clients that failed together: edges, locks);
- ``equal``: uniform in [step / 2, step] (a wait of at least half the step);
- ``shaved``: the step less up to ``fraction`` of it (a server's hint, such as a 429's
  back-off, kept nearly whole);
- ``decorrelated``: uniform in [base, min(cap, 3 * previous)] (each wait from the last).

``Backoff`` keeps the attempt count of one retry loop; the functions are pure.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

Jitter = Literal["none", "full", "equal", "shaved"]

# Past this many doublings every float step is at its cap anyway; it keeps ** from overflowing.
_MAX_EXPONENT = 64


def step(attempt: int, base_s: float, cap_s: float = math.inf, multiplier: float = 2.0) -> float:
    """The capped exponential step before retry ``attempt`` (0: the first retry)."""
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    if base_s < 0 or cap_s < 0 or multiplier < 1:
        raise ValueError("need base_s >= 0, cap_s >= 0 and multiplier >= 1")
    return min(cap_s, base_s * multiplier ** min(attempt, _MAX_EXPONENT))


def jittered(step_s: float, u: float, jitter: Jitter, *, fraction: float = 0.2) -> float:
    """The wait for ``step_s`` under ``jitter``, from the uniform draw ``u`` in [0, 1)."""
    if jitter == "none":
        return step_s
    if jitter == "full":
        return u * step_s
    if jitter == "equal":
        return step_s / 2 + u * step_s / 2
    return step_s * (1.0 - fraction * u)


def decorrelated(previous_s: float, u: float, base_s: float, cap_s: float) -> float:
    """The next wait after ``previous_s`` (``base_s`` before the first)."""
    high = min(cap_s, 3 * max(previous_s, base_s))
    return base_s + u * (high - base_s)


def wait_s(
    attempt: int,
    u: float,
    *,
    base_s: float,
    cap_s: float = math.inf,
    jitter: Jitter = "full",
    multiplier: float = 2.0,
) -> float:
    """``jittered(step(...))``: the wait before retry ``attempt``."""
    return jittered(step(attempt, base_s, cap_s, multiplier), u, jitter)


class Backoff:
    """The waits of one retry loop: ``next()`` after each failure, ``reset()`` after a
    success; ``draw`` gives ``u`` (``random.Random().random``; unused with no jitter)."""

    def __init__(
        self,
        *,
        base_s: float,
        cap_s: float,
        jitter: Jitter = "none",
        multiplier: float = 2.0,
        draw: Callable[[], float] = lambda: 0.0,
    ) -> None:
        step(0, base_s, cap_s, multiplier)  # validates
        self._base_s = base_s
        self._cap_s = cap_s
        self._jitter: Jitter = jitter
        self._multiplier = multiplier
        self._draw = draw
        self.attempt = 0

    def next(self) -> float:
        """The wait after the latest failure; the following one grows."""
        wait = wait_s(
            self.attempt,
            self._draw(),
            base_s=self._base_s,
            cap_s=self._cap_s,
            jitter=self._jitter,
            multiplier=self._multiplier,
        )
        self.attempt += 1
        return wait

    def reset(self) -> None:
        self.attempt = 0
