"""Errors of the coordination package.

PersoError
 └── CoordinationError   a lock or fenced store could not do what was asked
      ├── LockNotAcquired    every attempt of an acquire found the resource held
      ├── StaleFencingToken  a fenced store saw a newer holder than the one asking
      ├── LeaseLost          a holder's lease lapsed or could not be renewed: it stops
      ├── QuorumUnreachable  fewer than a majority of a Redlock's nodes answered a query
      └── SingleFlightTimeout  a follower waited past its bound for a single-flight result
"""

from __future__ import annotations

from protocol.exceptions import PersoError


class CoordinationError(PersoError):
    """Base of the coordination package's errors."""


class LockNotAcquired(CoordinationError):
    """The resource stayed held by someone else through every attempt of the retry policy."""

    def __init__(self, resource: str, attempts: int) -> None:
        super().__init__(f"lock on {resource!r} not acquired after {attempts} attempt(s)")
        self.resource = resource
        self.attempts = attempts


class StaleFencingToken(CoordinationError):
    """A fenced store refused a token lower than one already presented to it: the caller's
    lease lapsed and a newer holder has since used the store."""

    def __init__(self, key: str, fencing: int) -> None:
        super().__init__(f"fencing token {fencing} is stale for {key!r}")
        self.key = key
        self.fencing = fencing


class LeaseLost(CoordinationError):
    """A holder's lease on ``resource`` lapsed, or could not be renewed (so it may have
    lapsed unseen): the holder stops before its next write (``Heartbeat.check``)."""

    def __init__(self, resource: str) -> None:
        super().__init__(f"the lease on {resource!r} was lost")
        self.resource = resource


class QuorumUnreachable(CoordinationError):
    """Fewer than a majority of a Redlock's nodes answered, so whether ``resource`` is held
    cannot be told."""

    def __init__(self, resource: str, answered: int, nodes: int) -> None:
        super().__init__(f"only {answered} of {nodes} lock nodes answered about {resource!r}")
        self.resource = resource
        self.answered = answered
        self.nodes = nodes


class SingleFlightTimeout(CoordinationError):
    """A single-flight follower waited ``waited_ms`` for the leader's result, its bound, and
    the leader neither finished nor let its lease lapse."""

    def __init__(self, key: str, waited_ms: int) -> None:
        super().__init__(f"no result for {key!r} after waiting {waited_ms} ms")
        self.key = key
        self.waited_ms = waited_ms
