"""A circuit breaker for calls to a dependency (the edge's calls to the origin, the LLM tier's
calls to its model servers).

When the origin is down or drowning, every edge request that misses its cache would wait a
whole timeout for an answer that will not come, and the edges' retries would add load just
when the origin can least take it. The breaker notices a run of failures and then refuses
calls at once for a cooldown, so edges fail fast (and serve what they have) while the origin
recovers; afterwards a single probe call tests the water before traffic is let through.

    closed ──(failure_threshold consecutive failures, or failure ratio > failure_ratio
       ^      over the last `window` calls with at least `min_calls` of them)──> open
       │                                                                           │
       │ probe succeeds     probe fails: open again for open_s (doubled up to       │ open_s
       │                    max_open_s when that is set)                             │
       └──────────── half_open <───────────────────────────────────────────────────┘
                     (one probe at a time; other calls refused as if open)

Outcomes are attributed to the state the breaker is in when they are recorded: a call
allowed while closed that fails after the breaker opened changes nothing, and one that ends
while a probe is out counts as the probe's outcome (the origin answered, or did not, either
way). Pure and synchronous: the caller asks ``allow()`` before a call and reports how it
ended; time comes from the injected clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from enum import StrEnum


class State(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    def __init__(
        self,
        *,
        clock: Callable[[], float],
        failure_threshold: int = 5,
        window: int = 20,
        failure_ratio: float = 0.5,
        min_calls: int = 10,
        open_s: float = 5.0,
        max_open_s: float | None = None,
    ) -> None:
        """``open_s``: how long the circuit stays open; with ``max_open_s``, that is the
        first time only: each failed probe doubles it, up to ``max_open_s``, and a
        success starts over (a dependency back after a blip is probed soon, one that stays
        down is left alone longer)."""
        if failure_threshold < 1:
            raise ValueError(f"failure_threshold must be >= 1, got {failure_threshold}")
        if not 1 <= min_calls <= window:
            raise ValueError(f"need 1 <= min_calls <= window, got {min_calls} and {window}")
        if not 0.0 <= failure_ratio <= 1.0:
            raise ValueError(f"failure_ratio must be within [0, 1], got {failure_ratio}")
        if open_s < 0:
            raise ValueError(f"open_s must be >= 0, got {open_s}")
        if max_open_s is not None and max_open_s < open_s:
            raise ValueError(f"max_open_s must be >= open_s, got {max_open_s} < {open_s}")
        self._clock = clock
        self._failure_threshold = failure_threshold
        self._failure_ratio = failure_ratio
        self._min_calls = min_calls
        self._first_open_s = open_s
        self._max_open_s = open_s if max_open_s is None else max_open_s
        self._open_s = open_s  # this opening's
        self._state = State.CLOSED
        # Outcomes of the last `window` calls while closed (True: failed), and how many of
        # them failed, kept alongside so a call costs O(1).
        self._outcomes: deque[bool] = deque(maxlen=window)
        self._failures_in_window = 0
        self._consecutive_failures = 0
        self._opened_at = 0.0
        self._probe_out = False
        self.opened_total = 0
        self.rejected_total = 0

    @property
    def state(self) -> State:
        """The state as of the last call; an open breaker whose cooldown is over still reads
        ``open`` until ``allow()`` lets the probe through."""
        return self._state

    def allow(self) -> bool:
        """May a call go to the origin now? Every True must be followed by exactly one of
        ``record_success``, ``record_failure`` or ``abandon``."""
        if self._state is State.OPEN:
            if self._clock() < self._opened_at + self._open_s:
                self.rejected_total += 1
                return False
            self._state = State.HALF_OPEN
            self._probe_out = False
        if self._state is State.HALF_OPEN:
            if self._probe_out:
                self.rejected_total += 1
                return False
            self._probe_out = True
        return True

    def record_success(self) -> None:
        if self._state is State.HALF_OPEN:
            self._close()
        elif self._state is State.CLOSED:
            self._consecutive_failures = 0
            self._remember(failed=False)

    def record_failure(self) -> None:
        if self._state is State.HALF_OPEN:
            self._open_s = min(self._max_open_s, self._open_s * 2)
            self._open()
        elif self._state is State.CLOSED:
            self._consecutive_failures += 1
            self._remember(failed=True)
            if self._consecutive_failures >= self._failure_threshold or self._ratio_exceeded():
                self._open()

    def abandon(self) -> None:
        """The allowed call ended without telling anything about the origin (it was
        cancelled): frees the half-open probe slot, which would otherwise stay taken and
        keep the breaker refusing every call for good."""
        if self._state is State.HALF_OPEN:
            self._probe_out = False

    def end_cooldown(self) -> None:
        """Word from elsewhere that the dependency is back (it passed a health check after
        failing one): end the cooldown now, so that the next call is the probe. The probe
        alone still closes the circuit, and its failure doubles the next cooldown."""
        if self._state is State.OPEN:
            self._opened_at = self._clock() - self._open_s

    def retry_after_s(self) -> float:
        """Seconds until a probe will be allowed; 0.0 when not open."""
        if self._state is not State.OPEN:
            return 0.0
        return max(0.0, self._opened_at + self._open_s - self._clock())

    def _remember(self, *, failed: bool) -> None:
        outcomes = self._outcomes
        if len(outcomes) == outcomes.maxlen and outcomes[0]:
            self._failures_in_window -= 1
        outcomes.append(failed)
        self._failures_in_window += failed

    def _ratio_exceeded(self) -> bool:
        calls = len(self._outcomes)
        return calls >= self._min_calls and self._failures_in_window > self._failure_ratio * calls

    def _open(self) -> None:
        self._state = State.OPEN
        self._opened_at = self._clock()
        self._probe_out = False
        self.opened_total += 1

    def _close(self) -> None:
        # A fresh start: the failures that opened it must not reopen it on the next blip.
        self._state = State.CLOSED
        self._open_s = self._first_open_s
        self._outcomes.clear()
        self._failures_in_window = 0
        self._consecutive_failures = 0
        self._probe_out = False
