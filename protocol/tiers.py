"""The API's rate-limit tiers (free, standard, premium) and their limits.

Shared by the origin, which knows each customer's tier from their API key, and the edge,
which enforces the limits; so both read the same numbers and the edge needs nothing from
the origin. Rates are requests per second, exactly the designed "Rate Limits by Tier".
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
# Not an endpoint: the personalize requests that miss an edge's cache and make it ask the
# origin for a ranking (ours, not in the designed tiers). A client that varies its filters
# or options per request would otherwise turn every request into an origin ranking.
FILL = "fill"
# Not in the designed tiers either: the storefront demo's token route on edges, whose
# callers have no token and so no tier: every tier's row holds the same limit, and the
# edge checks it as free. A token lasts an hour and a storefront asks one per shopper it
# switches to.
DEMO_TOKEN = "demo_token"
ENDPOINTS = (PERSONALIZE, FEEDBACK, EXPLAIN, FILL, DEMO_TOKEN)


@dataclass(frozen=True, slots=True)
class TierLimit:
    # Requests per second one user of a customer may make to the endpoint.
    per_user_rps: float
    # Requests per second all users of one API key together may make to the endpoint.
    total_rps: float
    # Requests one user may make at once after being idle; None: one second's worth.
    per_user_burst: float | None = None


# A shopper may be switched to 5 times at once, then once a second; 20 tokens a second in
# all, whoever asks (each costs the origin a Redis read and a signature).
_DEMO_TOKEN = TierLimit(per_user_rps=1, total_rps=20, per_user_burst=5)


def _frozen(table: dict[Tier, dict[str, TierLimit]]) -> Mapping[Tier, Mapping[str, TierLimit]]:
    # Read-only all the way down: the table is module state shared by every importer.
    return MappingProxyType({tier: MappingProxyType(dict(row)) for tier, row in table.items()})


LIMITS: Mapping[Tier, Mapping[str, TierLimit]] = _frozen(
    {
        Tier.FREE: {
            PERSONALIZE: TierLimit(per_user_rps=10, total_rps=10_000),
            FEEDBACK: TierLimit(per_user_rps=50, total_rps=20_000),
            EXPLAIN: TierLimit(per_user_rps=1, total_rps=1_000),
            FILL: TierLimit(per_user_rps=0.5, total_rps=10_000, per_user_burst=10),
            DEMO_TOKEN: _DEMO_TOKEN,
        },
        Tier.STANDARD: {
            PERSONALIZE: TierLimit(per_user_rps=100, total_rps=50_000),
            FEEDBACK: TierLimit(per_user_rps=500, total_rps=100_000),
            EXPLAIN: TierLimit(per_user_rps=10, total_rps=5_000),
            FILL: TierLimit(per_user_rps=1, total_rps=50_000, per_user_burst=20),
            DEMO_TOKEN: _DEMO_TOKEN,
        },
        Tier.PREMIUM: {
            PERSONALIZE: TierLimit(per_user_rps=1_000, total_rps=100_000),
            FEEDBACK: TierLimit(per_user_rps=5_000, total_rps=500_000),
            EXPLAIN: TierLimit(per_user_rps=100, total_rps=10_000),
            FILL: TierLimit(per_user_rps=2, total_rps=100_000, per_user_burst=30),
            DEMO_TOKEN: _DEMO_TOKEN,
        },
    }
)
