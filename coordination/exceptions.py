"""Errors of the coordination package.

PersoError
 └── CoordinationError   a lock or fenced store could not do what was asked
      └── LockNotAcquired  every attempt of an acquire found the resource held
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
