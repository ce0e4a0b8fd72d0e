"""Errors of the origin.

PersoError (protocol.exceptions)
 └── OriginError
      ├── VectorStoreError   Qdrant unreachable, misconfigured or holding other data
      ├── CatalogError       the catalog is missing or does not match the settings
      │    ├── FusionWeightsError   a fusion weights file that cannot be used (names the key)
      │    ├── CatalogFileError     a catalog file to start from that cannot be loaded (names
      │    │                        the lines and fields)
      │    └── CatalogOriginError   a replica could not load the catalog from the catalog
      │                             origin (unreachable, refused, or not a catalog snapshot)
      ├── TextEncoderError   the configured text encoder cannot be loaded
      ├── VersionConflict    a user's embedding kept changing under a compare-and-set
      ├── TooManyPreferences a new category preference beyond the per-user cap
      ├── InvalidPolicyName  a ranking policy's name that cannot be defined (says why)
      ├── RecomputeError        a recompute from the log that cannot run as asked (says why)
      └── LlmError           the LLM tier got no usable answer (the caller uses templates)
           ├── LlmTimeout          no answer within the call's deadline
           ├── LlmRateLimited      our rate limiter, a 429, or the backoff after one
           ├── LlmUnavailable      connect error, 5xx, other non-2xx, malformed envelope
           │    └── LlmCircuitOpen every endpoint's circuit breaker is open
           ├── LlmBudgetExceeded   the day's LLM budget is spent
           └── InvalidLlmResponse  the model's message is not the JSON asked for
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


class CatalogFileError(CatalogError):
    """A catalog file (``PERSO_CATALOG``) is missing, empty or holds invalid lines; nothing
    of it was written."""


class CatalogOriginError(CatalogError):
    """A catalog replica could not load the catalog from the catalog origin
    (``PERSO_CATALOG_ORIGIN_URL``): it is unreachable, refused the call, or answered
    something that is not a catalog snapshot (``origin.catalog.snapshot``)."""


class TextEncoderError(OriginError):
    """The configured text encoder is not installed or its model cannot be loaded."""


class InvalidPolicyName(OriginError):
    """A ranking policy's name that does not match the rule, or is reserved."""


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


class LlmError(OriginError):
    """The model server gave no usable answer; the caller falls back to templates."""


class LlmTimeout(LlmError):
    """No answer within the call's deadline."""


class LlmRateLimited(LlmError):
    """Too many calls: our own limiter refused, the server answered 429, or the endpoint is
    still backing off after one. ``retry_after_s``: when a call may go again, if known."""

    def __init__(self, reason: str, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after_s = retry_after_s


class LlmUnavailable(LlmError):
    """The server cannot be reached, failed (5xx), refused the call (another non-2xx) or
    answered something that is not an OpenAI chat completion. ``status``: the HTTP status,
    when there was one."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.status = status


class LlmCircuitOpen(LlmUnavailable):
    """Every endpoint's circuit breaker is open: no request was sent."""

    def __init__(self, reason: str, retry_after_s: float) -> None:
        super().__init__(reason)
        self.retry_after_s = retry_after_s


class LlmBudgetExceeded(LlmError):
    """The day's LLM budget (every origin process together) is spent: templates only until
    the next UTC day."""


class InvalidLlmResponse(LlmError):
    """The model's message is not the JSON explanation asked for."""


class RecomputeError(OriginError):
    """A recompute from the log cannot run as asked (a scratch keyspace that is not empty)."""
