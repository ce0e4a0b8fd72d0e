"""Exceptions shared by every process.

PersoError
 ├── ApiError           an HTTP answer other than 200: status, code, reason, field
 └── MalformedMessage   a stream entry that does not decode into its type
"""

from __future__ import annotations


class PersoError(Exception):
    """Base of the project's own errors."""


class ApiError(PersoError):
    """An error with an HTTP status and a machine-readable code, raised by handlers."""

    def __init__(
        self,
        status: int,
        error: str,
        reason: str,
        *,
        field: str | None = None,
        retry_after_s: int | None = None,
        errors: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.error = error
        self.reason = reason
        self.field = field
        self.retry_after_s = retry_after_s
        # every problem of an invalid body (``field`` and ``reason`` name the first)
        self.errors = errors


class MalformedMessage(PersoError):
    """A stream entry that is not a valid encoding of the expected message."""
