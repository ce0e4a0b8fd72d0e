"""The rules of an edge's origin set (``edge.origins.rotation``): ejection, selection, panic,
as tables over an injected clock and random source."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import MutableSequence
from typing import Any

import pytest

from edge.origins.rotation import (
    Candidate,
    Choice,
    EjectionRules,
    Standing,
    after_check,
    after_outage,
    after_success,
    candidate,
    ejection_s,
    is_ejected,
    order,
)

RULES = EjectionRules(after=3, base_s=2.0, max_s=10.0)


class Unshuffled(random.Random):
    """A random source whose shuffles leave the list as it is: ties keep index order."""

    def shuffle(self, x: MutableSequence[Any]) -> None:
        return None


class Reversed(random.Random):
    """A random source whose shuffles reverse the list: ties in reverse index order."""

    def shuffle(self, x: MutableSequence[Any]) -> None:
        x.reverse()


@pytest.mark.parametrize(
    ("ejections", "seconds"),
    [(0, 2.0), (1, 2.0), (2, 4.0), (3, 8.0), (4, 10.0), (50, 10.0), (10_000, 10.0)],
)
def test_an_ejection_doubles_with_each_repeat_up_to_the_cap(ejections: int, seconds: float) -> None:
    assert ejection_s(ejections, RULES) == seconds


@pytest.mark.parametrize(
    ("after", "base_s", "max_s"), [(0, 1.0, 2.0), (1, 0.0, 2.0), (1, 3.0, 2.0), (1, -1.0, 2.0)]
)
def test_ejection_rules_are_checked(after: int, base_s: float, max_s: float) -> None:
    with pytest.raises(ValueError, match=r"must be|need"):
        EjectionRules(after=after, base_s=base_s, max_s=max_s)


def replay(events: str, start: float = 100.0) -> tuple[Standing, float]:
    """The standing after ``events`` from a fresh one, and the clock then. Each event is a
    word: ``o`` an outage, ``s`` a success, ``ok``/``bad`` a health check, ``+N`` N
    seconds passing."""
    standing, now = Standing(), start
    for event in events.split():
        if event == "o":
            standing = after_outage(standing, now, RULES)
        elif event == "s":
            standing = after_success(standing)
        elif event in ("ok", "bad"):
            standing = after_check(standing, event == "ok", now, RULES)
        else:
            now += float(event)
    return standing, now


@pytest.mark.parametrize(
    ("events", "ejected", "ejections", "left_s"),
    [
        # Passive: the third outage in a row ejects, for the base time.
        ("o o", False, 0, 0.0),
        ("o o o", True, 1, 2.0),
        ("o o o +1", True, 1, 1.0),
        ("o o o +2", False, 1, 0.0),
        # A success in between starts the count over.
        ("o o s o o", False, 0, 0.0),
        # Back after its time, three more outages: ejected again, for twice as long...
        ("o o o +2 o o o", True, 2, 4.0),
        ("o o o +2 o o o +4 o o o", True, 3, 8.0),
        # ... up to the cap.
        ("o o o +2 o o o +4 o o o +8 o o o", True, 4, 10.0),
        ("o o o +2 o o o +4 o o o +8 o o o +10 o o o", True, 5, 10.0),
        # Outages while ejected (calls in flight, panic) neither extend it nor count double.
        ("o o o o o o +1", True, 1, 1.0),
        # A success resets the doubling and ends an ejection (a panic call answered).
        ("o o o +2 o o o s", False, 0, 0.0),
        ("o o o +2 o o o +4 s o o o", True, 1, 2.0),
        # Active: a failed check ejects at once; failing checks after the ejection's time
        # eject again, doubled; a passing check ends the ejection and resets the doubling.
        ("bad", True, 1, 2.0),
        ("bad +1 bad", True, 1, 1.0),
        ("bad +2 bad", True, 2, 4.0),
        ("bad +2 bad +4 bad", True, 3, 8.0),
        ("bad +1 ok", False, 0, 0.0),
        ("bad +2 bad +4 bad ok bad", True, 1, 2.0),
        # A passing check does not end an ejection the calls earned: /readyz answering says
        # nothing of why they failed ...
        ("o o o ok", True, 1, 2.0),
        # ... unless a check failed meanwhile: then the origin was down and is back.
        ("o o o bad ok", False, 0, 0.0),
        ("ok", False, 0, 0.0),
    ],
)
def test_ejection(events: str, ejected: bool, ejections: int, left_s: float) -> None:
    standing, now = replay(events)
    assert is_ejected(standing, now) is ejected
    assert standing.ejections == ejections
    assert max(standing.ejected_until - now, 0.0) == pytest.approx(left_s)


@pytest.mark.parametrize(
    ("events", "ready", "last_failure"),
    [
        ("", None, -math.inf),
        ("ok", True, -math.inf),
        ("bad", False, 100.0),
        ("bad +3 ok", True, 100.0),
        ("ok +3 bad", False, 103.0),
        ("o +5 o", None, 105.0),
        # A call's success does not make a failed check's origin healthy: only a check does.
        ("bad +1 s", False, 100.0),
    ],
)
def test_health_and_last_failure(events: str, ready: bool | None, last_failure: float) -> None:
    standing, _ = replay(events)
    assert (standing.ready, standing.last_failure) == (ready, last_failure)


def test_a_success_changes_nothing_of_a_clean_standing() -> None:
    clean = Standing(ready=True)
    assert after_success(clean) is clean


def c(
    inflight: int = 0,
    *,
    healthy: bool = True,
    ejected: bool = False,
    cooling: bool = False,
    failed: float = -math.inf,
) -> Candidate:
    return Candidate(inflight, healthy, ejected, cooling, failed)


def picks(*spec: int | str) -> list[Choice]:
    """``picks(1, 0, "p2")``: origin 1, then 0, then 2 in panic."""
    return [
        Choice(int(s[1:]), panic=True) if isinstance(s, str) else Choice(s, panic=False)
        for s in spec
    ]


@pytest.mark.parametrize(
    ("candidates", "avoid", "rng", "expected"),
    [
        # Fewest attempts in flight first.
        ([c(2), c(0), c(1)], None, Unshuffled(), picks(1, 2, 0)),
        # Ties in the random source's order.
        ([c(0), c(0), c(1)], None, Unshuffled(), picks(0, 1, 2)),
        ([c(0), c(0), c(1)], None, Reversed(), picks(1, 0, 2)),
        # The origin that just failed is left out when there is another ...
        ([c(0), c(5)], 0, Unshuffled(), picks(1)),
        ([c(0), c(0), c(0)], 1, Unshuffled(), picks(0, 2)),
        # ... and kept when it is the only one.
        ([c(0)], 0, Unshuffled(), picks(0)),
        # Ejected or unhealthy: after those in the rotation, whatever their load.
        ([c(0, ejected=True), c(9)], None, Unshuffled(), picks(1, "p0")),
        ([c(0, healthy=False), c(9)], None, Unshuffled(), picks(1, "p0")),
        # Panic: every origin out of the rotation, least recently failed first ...
        (
            [c(0, ejected=True, failed=30.0), c(0, ejected=True, failed=10.0), c(healthy=False)],
            None,
            Unshuffled(),
            picks("p2", "p1", "p0"),
        ),
        # ... then fewest in flight.
        (
            [c(3, ejected=True, failed=10.0), c(1, ejected=True, failed=10.0)],
            None,
            Unshuffled(),
            picks("p1", "p0"),
        ),
        # A single origin, ejected: still tried.
        ([c(0, ejected=True, failed=1.0)], None, Unshuffled(), picks("p0")),
        # Cooling circuits last, where their breakers refuse (and count) the call.
        ([c(0, cooling=True), c(4, ejected=True)], None, Unshuffled(), picks("p1", 0)),
        ([c(0, cooling=True), c(4)], None, Unshuffled(), picks(1, 0)),
        ([c(0, cooling=True)], None, Unshuffled(), picks(0)),
        # Avoided and cooling: nothing else to try.
        ([c(0), c(0, cooling=True)], 0, Unshuffled(), picks(1)),
        ([], None, Unshuffled(), []),
    ],
)
def test_order(
    candidates: list[Candidate], avoid: int | None, rng: random.Random, expected: list[Choice]
) -> None:
    assert order(candidates, rng, avoid=avoid) == expected


def test_ties_are_broken_at_random() -> None:
    """Idle edges spread their calls over equal origins rather than all picking the first."""
    rng = random.Random(11)
    firsts = Counter(order([c(1), c(0), c(0), c(0)], rng)[0].index for _ in range(3000))
    assert set(firsts) == {1, 2, 3}
    assert all(900 < count < 1100 for count in firsts.values())


@pytest.mark.parametrize(
    ("standing", "now", "expected"),
    [
        (Standing(), 0.0, c(2)),
        (Standing(ready=False, last_failure=5.0), 6.0, c(2, healthy=False, failed=5.0)),
        (Standing(ejected_until=10.0), 9.0, c(2, ejected=True)),
        (Standing(ejected_until=10.0), 10.0, c(2)),
    ],
)
def test_candidate(standing: Standing, now: float, expected: Candidate) -> None:
    assert candidate(standing, inflight=2, cooling=False, now=now) == expected
