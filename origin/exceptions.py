"""Errors of the origin.

PersoError (protocol.exceptions)
 └── OriginError
      ├── VectorStoreError   Qdrant unreachable, misconfigured or holding other data
      ├── CatalogError       the catalog is missing or does not match the settings
      │    └── FusionWeightsError   a fusion weights file that cannot be used (names the key)
      ├── TextEncoderError   the configured text encoder cannot be loaded
      ├── VersionConflict    a user's embedding kept changing under a compare-and-set
      └── TooManyPreferences a new category preference beyond the per-user cap
"""

from __future__ import annotations

from protocol.exceptions import PersoError


class OriginError(PersoError):
    """Base of the origin's errors."""


class VectorStoreError(OriginError):
    """Qdrant cannot be used as configured."""


class CatalogError(OriginError):
    """The catalog is missing, empty, or does not match the configured dimension."""


class FusionWeightsError(CatalogError):
    """A fusion weights file is missing, unreadable, or has a key of the wrong shape."""


class TextEncoderError(OriginError):
    """The configured text encoder is not installed or its model cannot be loaded."""


class VersionConflict(OriginError):
    """Every compare-and-set attempt on a user's embedding met a newer version."""


class TooManyPreferences(OriginError):
    """The user already holds the maximum number of category preferences; a new category
    needs one of them cleared first (strength 0)."""

    def __init__(self, category: str, cap: int) -> None:
        super().__init__(
            f"at most {cap} category preferences per user; clear one (strength 0) "
            f"before adding {category!r}"
        )
        self.category = category
        self.cap = cap
