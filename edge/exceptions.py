"""Errors of the edge.

PersoError (protocol.exceptions)
 └── EdgeError
      ├── OriginUnavailable   the origin timed out, refused, or answered 5xx
      └── OriginRejected      the origin answered 4xx (its status and body are kept)
"""

from __future__ import annotations

from protocol.exceptions import PersoError


class EdgeError(PersoError):
    """Base of the edge's errors."""


class OriginUnavailable(EdgeError):
    """The origin could not give an answer now; a retry later may succeed."""


class OriginRejected(EdgeError):
    """The origin refused the request itself; retrying the same request will not help."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"origin answered {status}")
        self.status = status
        self.body = body
