"""Rate-limit tiers of the API and their limits (seed 001 "API Rate Limiting").

Shared by the origin, which knows each customer's tier from their API key, and the edge,
which enforces the limits; so both read the same numbers and the edge needs nothing from
the origin. Rates are requests per second, exactly the seed's "Rate Limits by Tier".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType


class Tier(StrEnum):
    FREE = "free"
    STANDARD = "standard"
    PREMIUM = "premium"


# The endpoints that carry a limit, as they are named in LIMITS.
PERSONALIZE = "personalize"
FEEDBACK = "feedback"
EXPLAIN = "explain"
ENDPOINTS = (PERSONALIZE, FEEDBACK, EXPLAIN)


@dataclass(frozen=True, slots=True)
class TierLimit:
    # Requests per second one user of a customer may make to the endpoint.
    per_user_rps: float
    # Requests per second all users of one API key together may make to the endpoint.
    total_rps: float


def _frozen(table: dict[Tier, dict[str, TierLimit]]) -> Mapping[Tier, Mapping[str, TierLimit]]:
    # Read-only all the way down: the table is module state shared by every importer.
    return MappingProxyType({tier: MappingProxyType(dict(row)) for tier, row in table.items()})


LIMITS: Mapping[Tier, Mapping[str, TierLimit]] = _frozen(
    {
        Tier.FREE: {
            PERSONALIZE: TierLimit(per_user_rps=10, total_rps=10_000),
            FEEDBACK: TierLimit(per_user_rps=50, total_rps=20_000),
            EXPLAIN: TierLimit(per_user_rps=1, total_rps=1_000),
        },
        Tier.STANDARD: {
            PERSONALIZE: TierLimit(per_user_rps=100, total_rps=50_000),
            FEEDBACK: TierLimit(per_user_rps=500, total_rps=100_000),
            EXPLAIN: TierLimit(per_user_rps=10, total_rps=5_000),
        },
        Tier.PREMIUM: {
            PERSONALIZE: TierLimit(per_user_rps=1_000, total_rps=100_000),
            FEEDBACK: TierLimit(per_user_rps=5_000, total_rps=500_000),
            EXPLAIN: TierLimit(per_user_rps=100, total_rps=10_000),
        },
    }
)
