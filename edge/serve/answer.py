"""What an endpoint answers, independent of the server that sends it (``Answer``; a
``Route`` of ``edge.http.asgi``), and the answers every endpoint gives alike: 429 over a rate
limit (the tier's, ``tier_of``) and 503 when neither the cache nor the origin can answer.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from edge.limits.rate_limit import Decision
from edge.node import Edge
from protocol.exceptions import ApiError
from protocol.identity import Claims
from protocol.tiers import Tier

JSON = "application/json"


@dataclass
class Answer:
    """An HTTP answer, independent of the server that sends it."""

    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)


# A route ``edge.http.asgi`` serves without a framework: the node, the request's headers
# (``edge.http.asgi.wanted_headers``) and body, to the answer.
Route = Callable[[Edge, Mapping[str, str], bytes], Awaitable[Answer]]


def over_the_limit(decision: Decision, claims: Claims) -> ApiError:
    """The 429 of a refused request, with the wait its bucket asks for."""
    return ApiError(
        429,
        "rate_limited",
        f"over the {decision.scope} rate limit of tier {claims.tier}",
        retry_after_s=max(1, math.ceil(decision.retry_after_s)),
    )


def origin_unavailable(edge: Edge, what: str) -> ApiError:
    """The 503 of a request the edge can answer neither from its cache nor through the
    origin; ``Retry-After`` is when an origin's circuit lets a call through again."""
    return ApiError(
        503,
        "origin_unavailable",
        f"{what} and the origin is unavailable; retry",
        retry_after_s=max(1, math.ceil(edge.origin.retry_after_s())),
    )


def tier_of(claims: Claims) -> Tier:
    try:
        return Tier(claims.tier)
    except ValueError:
        return Tier.FREE  # a tier this edge does not know gets the smallest limits
