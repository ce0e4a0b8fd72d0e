"""Errors of the edge.

PersoError (protocol.exceptions)
 └── EdgeError
      ├── OriginUnavailable   the origin timed out, refused, or answered 429/502/503/504
      │    └── CircuitOpen    not even tried: the breaker is open after repeated failures
      ├── OriginRejected      the origin refused this request: 4xx, or 500 (its status and
      │                       body are kept)
      └── AudienceMismatch    an answer for one audience offered to a store under another
                              audience's key (refused: it would reach the wrong users)
"""

from __future__ import annotations

import logging

from protocol.exceptions import PersoError


class EdgeError(PersoError):
    """Base of the edge's errors."""


class OriginUnavailable(EdgeError):
    """The origin could not give an answer now; a retry later may succeed."""

    # How loudly a caller logs it: each failed call is news.
    log_level = logging.WARNING


class CircuitOpen(OriginUnavailable):
    """The call was refused without a network call: the origin's circuit is open. Expected
    on every miss during an outage, so callers log it quietly (the opening was logged)."""

    log_level = logging.DEBUG


class OriginRejected(EdgeError):
    """The origin refused the request itself, or failed on it (a 500: a bug its content
    triggers); retrying the same request will not help."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"origin answered {status}")
        self.status = status
        self.body = body


class AudienceMismatch(EdgeError):
    """An entry whose audience is not its key's: storing it would serve one user's answer to
    others (or a segment's under one user's key). Refused by every store."""
