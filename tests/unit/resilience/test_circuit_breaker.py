"""The circuit breaker as tables: a script of events and the state after each one.

Events: ``f`` a failure, ``s`` a success, ``a`` a call allowed, ``x`` a call refused,
``~`` an allowed call abandoned (cancelled), ``!`` the cooldown ended early (a health check
passed), ``+N`` N seconds pass. States: ``c`` closed,
``o`` open, ``h`` half-open.
"""

from __future__ import annotations

from typing import Any

import pytest

from resilience.circuit_breaker import CircuitBreaker, State
from tests.fakes import FakeClock

STATES = {"c": State.CLOSED, "o": State.OPEN, "h": State.HALF_OPEN}


def play(breaker: CircuitBreaker, clock: FakeClock, script: str) -> str:
    """Runs the script; returns the state after each event, space-separated."""
    seen: list[str] = []
    for event in script.split():
        if event == "f":
            breaker.record_failure()
        elif event == "s":
            breaker.record_success()
        elif event == "~":
            breaker.abandon()
        elif event == "!":
            breaker.end_cooldown()
        elif event in ("a", "x"):
            assert breaker.allow() is (event == "a"), f"event {len(seen) + 1}: {script!r}"
        else:
            clock.tick(float(event))
        seen.append(breaker.state.value[0])
    return " ".join(seen)


@pytest.mark.parametrize(
    ("options", "script", "states"),
    [
        # Consecutive failures: the fifth opens it; a success in between resets the run.
        ({}, "f f f f f", "c c c c o"),
        ({}, "f f f f s f f f f", "c c c c c c c c c"),
        ({"failure_threshold": 1}, "f", "o"),
        # Open: refused until open_s has passed, then one probe.
        ({"failure_threshold": 1}, "f x +4.9 x +0.1 a", "o o o o o h"),
        # The probe's success closes it, its failure reopens it for open_s again.
        ({"failure_threshold": 1}, "f +5 a s a", "o o h c c"),
        ({"failure_threshold": 1}, "f +5 a f x +4.9 x +0.1 a s", "o o h o o o o o h c"),
        # One probe at a time: others are refused while it is out.
        ({"failure_threshold": 1}, "f +5 a x x s a a", "o o h h h c c c"),
        # An abandoned probe frees the slot for the next call.
        ({"failure_threshold": 1}, "f +5 a x ~ a s", "o o h h h h c"),
        # Abandoning while closed changes nothing.
        ({}, "a ~ a s", "c c c c"),
        # Late outcomes of calls allowed before it opened change nothing while open.
        ({"failure_threshold": 1}, "f s f +4 x", "o o o o o"),
        # A closed breaker forgets the failures that opened it.
        ({"failure_threshold": 2}, "f f +5 a s f", "c o o h c c"),
        # Failure ratio over the window: 5 of 10 is not more than half ...
        ({}, "f s f s f s f s f s", "c c c c c c c c c c"),
        # ... 6 of 11 is.
        ({}, "f s f s f s f s f s f", "c c c c c c c c c c o"),
        # Fewer than min_calls: no verdict from the ratio (3 of 4 failed).
        ({"min_calls": 5}, "f f s f", "c c c c"),
        ({"min_calls": 4}, "f f s f", "c c c o"),
        # The window rolls: old failures drop out (window 4, min_calls 4, ratio 0.5).
        ({"window": 4, "min_calls": 4}, "f f s s s s f f", "c c c c c c c c"),
        ({"window": 4, "min_calls": 4}, "f f s s s f f f", "c c c c c c c o"),
        # With max_open_s, each failed probe doubles the wait (1, 2, 4, then the cap 5) ...
        (
            {"failure_threshold": 1, "open_s": 1.0, "max_open_s": 5.0},
            "f +1 a f +1.9 x +0.1 a f +3.9 x +0.1 a f +4.9 x +0.1 a",
            "o o h o o o o h o o o o h o o o o h",
        ),
        # ... and a success starts over from open_s.
        (
            {"failure_threshold": 1, "open_s": 1.0, "max_open_s": 5.0},
            "f +1 a f +2 a s f +1 a",
            "o o h o o h c o o h",
        ),
        # Ending the cooldown early lets the next call be the probe, and only that one ...
        ({"failure_threshold": 1}, "f x ! a x s", "o o o h h c"),
        # ... whose failure still doubles the next cooldown.
        (
            {"failure_threshold": 1, "open_s": 1.0, "max_open_s": 5.0},
            "f ! a f +1.9 x +0.1 a",
            "o o h o o o o h",
        ),
        # Closed or half open, it changes nothing.
        ({}, "! f !", "c c c"),
        ({"failure_threshold": 1}, "f +5 a ! x", "o o h h h"),
    ],
)
def test_transitions(options: dict[str, Any], script: str, states: str) -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock, **options)
    assert play(breaker, clock, script) == states


@pytest.mark.parametrize(
    ("script", "opened", "rejected"),
    [
        ("a s", 0, 0),
        ("f x x x", 1, 3),
        ("f +5 a x f x", 2, 2),
        ("f +5 a s f", 2, 0),
    ],
)
def test_counters(script: str, opened: int, rejected: int) -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock, failure_threshold=1)
    play(breaker, clock, script)
    assert (breaker.opened_total, breaker.rejected_total) == (opened, rejected)


@pytest.mark.parametrize(
    ("script", "retry_after"),
    [
        ("", 0.0),
        ("f", 5.0),
        ("f +1.5", 3.5),
        ("f +5", 0.0),
        ("f +7", 0.0),  # still open (no allow yet), but a probe would go through now
        ("f +5 a", 0.0),  # half-open
        ("f +5 a f +1", 4.0),  # reopened: a whole open_s again
    ],
)
def test_retry_after(script: str, retry_after: float) -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock, failure_threshold=1)
    play(breaker, clock, script)
    assert breaker.retry_after_s() == pytest.approx(retry_after)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"failure_threshold": 0}, "failure_threshold"),
        ({"min_calls": 0}, "min_calls"),
        ({"min_calls": 21}, "min_calls"),
        ({"failure_ratio": 1.5}, "failure_ratio"),
        ({"open_s": -1.0}, "open_s"),
        ({"open_s": 2.0, "max_open_s": 1.0}, "max_open_s"),
    ],
)
def test_nonsense_settings_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CircuitBreaker(clock=FakeClock(), **options)
