"""Which of an edge's origins takes the next attempt, and which are out of the rotation.

An edge may know several origins (``PERSO_ORIGIN_URLS``). Each has its own circuit breaker
(``edge.origins.link``) and a ``Standing`` here, kept by Envoy's outlier-detection rules:

- **passive ejection**: ``after`` outages in a row (a transport failure, a timeout, a 502,
  503 or 504: ``edge.origins.link.status_outcome``) take the origin out of the rotation;
- **active health checks**: the edge asks each origin's ``/readyz`` every
  ``PERSO_ORIGIN_HEALTH_INTERVAL_S``; a failed check marks it unhealthy and ejects it;
- an ejection lasts ``base_s * 2**(n - 1)``, ``n`` the ejections since the origin last
  answered, up to ``max_s``: one that keeps failing is left alone longer each time;
- a success (an answer that is not an outage: a 4xx is the origin up and answering) resets
  the count and ``n``, and ends an ejection; a passing health check makes the origin
  healthy again and ends an ejection that a failed check began (it is back), but not one
  its calls earned: ``/readyz`` says nothing of why they failed.

Selection (``order``): the healthy, non-ejected origins first, fewest attempts in flight
first, ties in random order (so idle edges spread their calls); then, in **panic**, the
others, least recently failed first: an edge whose every origin is ejected still tries
them rather than failing every request. Origins whose circuit is open and cooling down
come last: their breaker refuses them, which counts the refusal. The origin that just
failed the call is left out when there is another: a retry never goes back to it.

Pure and synchronous: the standing of an origin changes only through these functions,
with the time and the random source passed in.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from resilience.backoff import step


@dataclass(frozen=True, slots=True)
class EjectionRules:
    """Outlier ejection's settings (``PERSO_ORIGIN_EJECT_*``)."""

    after: int = 3
    base_s: float = 2.0
    max_s: float = 60.0

    def __post_init__(self) -> None:
        if self.after < 1:
            raise ValueError(f"after must be >= 1, got {self.after}")
        if not 0 < self.base_s <= self.max_s:
            raise ValueError(f"need 0 < base_s <= max_s, got {self.base_s} and {self.max_s}")


@dataclass(frozen=True, slots=True)
class Standing:
    """One origin's place in the rotation."""

    # The last health check's verdict; None before the first (presumed healthy).
    ready: bool | None = None
    outages: int = 0  # outages in a row since its last success
    ejections: int = 0  # ejections since its last success: the next lasts twice as long
    ejected_until: float = 0.0  # out of the rotation while the clock reads less
    by_check: bool = False  # the ejection began with (or met) a failed health check
    last_failure: float = -math.inf  # when a call or a check last failed


def ejection_s(ejections: int, rules: EjectionRules) -> float:
    """How long the ``ejections``-th ejection in a row lasts (1: the first)."""
    return step(max(ejections - 1, 0), rules.base_s, rules.max_s)


def is_ejected(standing: Standing, now: float) -> bool:
    return now < standing.ejected_until


def _ejected(standing: Standing, now: float, rules: EjectionRules, *, by_check: bool) -> Standing:
    ejections = standing.ejections + 1
    return replace(
        standing,
        outages=0,
        ejections=ejections,
        ejected_until=now + ejection_s(ejections, rules),
        by_check=by_check,
    )


def after_outage(standing: Standing, now: float, rules: EjectionRules) -> Standing:
    """An attempt on the origin ended in an outage: the ``after``-th in a row ejects it."""
    failed = replace(standing, outages=standing.outages + 1, last_failure=now)
    if failed.outages >= rules.after and not is_ejected(failed, now):
        return _ejected(failed, now, rules, by_check=False)
    return failed


def after_success(standing: Standing) -> Standing:
    """The origin answered (anything but an outage): back in the rotation, counts reset."""
    if standing.outages == 0 and standing.ejections == 0 and standing.ejected_until == 0.0:
        return standing  # the common case: nothing to change, nothing to allocate
    return replace(standing, outages=0, ejections=0, ejected_until=0.0, by_check=False)


def after_check(standing: Standing, ok: bool, now: float, rules: EjectionRules) -> Standing:
    """A health check's verdict: a failure ejects (unless already out, then the check is
    what a pass must undo); a pass ends an ejection that a failed check began."""
    if ok:
        if standing.by_check:
            return replace(standing, ready=True, ejections=0, ejected_until=0.0, by_check=False)
        return replace(standing, ready=True)
    failed = replace(standing, ready=False, last_failure=now)
    if is_ejected(failed, now):
        return replace(failed, by_check=True)
    return _ejected(failed, now, rules, by_check=True)


@dataclass(frozen=True, slots=True)
class Candidate:
    """What selection needs to know of one origin now."""

    inflight: int
    healthy: bool
    ejected: bool
    cooling: bool  # its circuit is open and not yet ready for a probe
    last_failure: float


def candidate(standing: Standing, *, inflight: int, cooling: bool, now: float) -> Candidate:
    return Candidate(
        inflight=inflight,
        healthy=standing.ready is not False,
        ejected=is_ejected(standing, now),
        cooling=cooling,
        last_failure=standing.last_failure,
    )


@dataclass(frozen=True, slots=True)
class Choice:
    index: int
    panic: bool  # chosen although ejected or unhealthy: no origin in the rotation was left


def order(
    candidates: Sequence[Candidate], rng: random.Random, *, avoid: int | None = None
) -> list[Choice]:
    """The origins in the order to try them for the next attempt (module docstring).
    ``avoid``: the origin whose outage the attempt retries, left out when another exists."""
    indices = [i for i in range(len(candidates)) if i != avoid or len(candidates) == 1]
    # Shuffled, then sorted stably: equal origins stay in random order.
    rng.shuffle(indices)
    rotation = [i for i in indices if _in_rotation(candidates[i])]
    rotation.sort(key=lambda i: candidates[i].inflight)
    panic = [i for i in indices if not candidates[i].cooling and not _in_rotation(candidates[i])]
    panic.sort(key=lambda i: (candidates[i].last_failure, candidates[i].inflight))
    cooling = [i for i in indices if candidates[i].cooling]
    return [
        *(Choice(i, panic=False) for i in rotation),
        *(Choice(i, panic=True) for i in panic),
        *(Choice(i, panic=False) for i in cooling),
    ]


def _in_rotation(c: Candidate) -> bool:
    return c.healthy and not c.ejected and not c.cooling
