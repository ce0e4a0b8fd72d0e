"""Errors of the load tests.

PersoError
 └── LoadTestError      the load test cannot run as asked
      └── TargetsError  where to send traffic is missing or invalid (the message says what)
"""

from __future__ import annotations

from protocol.exceptions import PersoError


class LoadTestError(PersoError):
    """The load test cannot run as asked."""


class TargetsError(LoadTestError):
    """The edges, origin or API key to load are missing or invalid."""
