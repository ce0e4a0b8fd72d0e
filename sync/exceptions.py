"""Errors of origin-to-edge sync.

PersoError (protocol.exceptions)
 ├── MalformedMessage (protocol.exceptions)
 │    └── sync MalformedMessage   also a ValueError: bytes that are not a sync message
 └── SyncError
      └── PublishFailed           Redis refused or lost a publish (all regions or none)
"""

from __future__ import annotations

from protocol import exceptions


class SyncError(exceptions.PersoError):
    """Base of the sync package's own errors."""


class MalformedMessage(exceptions.MalformedMessage, ValueError):
    """Bytes (or a stream entry) that do not decode into a sync message; says why."""


class PublishFailed(SyncError):
    """A publish did not complete; it landed in every region or in none, and which one is
    unknown when the reply was lost. Publishing again is safe: applying a message twice
    has the effect of applying it once."""
