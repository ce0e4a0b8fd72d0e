"""The storefront demo's token route: ``POST /v1/demo/token {"user_id": ...}``.

In a real shop the browser gets its user token from the shop's own backend, which signed
the shopper in and asked the origin for it with the shop's API key (``POST
/v1/auth/token``, ``X-API-Key``). A storefront demo has no such backend, so this route
plays it: it asks the origin exactly so, with ``PERSO_DEMO_API_KEY``, and hands the
origin's answer to the page. It therefore gives a token for any user id to anyone who can
reach the edge, which is why it exists only with ``PERSO_DEMO_TOKENS=true`` (``perso up
--demo``); otherwise ``edge.http.asgi`` never routes the path here and it answers the 404 of
any unknown path.

Bad input is a 400 naming the field. Each user id, and all callers together, are held to
``protocol.tiers.DEMO_TOKEN`` (429 with ``Retry-After``). An origin that cannot be asked
is a 503 with ``Retry-After``; one that refuses the demo API key is a 503 that says so:
the edge is misconfigured, the caller can do nothing about it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

from pydantic import SecretStr

from edge.exceptions import OriginRejected, OriginUnavailable
from edge.node import Edge
from edge.serve.answer import JSON, Answer, Route, origin_unavailable
from protocol.api import DemoTokenRequest
from protocol.exceptions import ApiError
from protocol.tiers import DEMO_TOKEN, Tier
from web.request_body import parse_json

log = logging.getLogger(__name__)

DEMO_TOKEN_PATH = "/v1/demo/token"
# Whose limit the route's callers share, in the place of an API key's name: they have none.
DEMO_CALLER = "demo-token-route"


def token_route(api_key: SecretStr) -> Route:
    """The route's handler, asking the origin with ``api_key``."""

    async def token(edge: Edge, headers: Mapping[str, str], raw: bytes) -> Answer:
        body: DemoTokenRequest = parse_json(DemoTokenRequest, raw, now=edge.clock())
        decision = await edge.check_limit(Tier.FREE, DEMO_TOKEN, body.user_id, DEMO_CALLER)
        if not decision.allowed:
            edge.counters.rate_limited += 1
            raise ApiError(
                429,
                "rate_limited",
                f"over the demo token route's {decision.scope} rate limit",
                retry_after_s=max(1, math.ceil(decision.retry_after_s)),
            )
        try:
            issued = await edge.origin.user_token(body.user_id, api_key.get_secret_value())
        except OriginRejected as exc:
            if exc.status in (401, 403):
                log.error("the origin refused PERSO_DEMO_API_KEY (%d)", exc.status)
                raise ApiError(
                    503,
                    "demo_tokens_unavailable",
                    "the origin refused this edge's demo API key (PERSO_DEMO_API_KEY must "
                    "be a secret of the origin's PERSO_API_KEYS)",
                ) from exc
            if exc.status < 500:
                return Answer(exc.status, exc.body, [("content-type", JSON)])
            raise origin_unavailable(edge, "no token issued") from exc
        except OriginUnavailable as exc:
            log.log(exc.log_level, "demo token not issued: %s", exc)
            raise origin_unavailable(edge, "no token issued") from exc
        # A bearer credential: no cache anywhere may keep it.
        headers_out = [("content-type", JSON), ("cache-control", "no-store")]
        return Answer(200, issued.model_dump_json().encode(), headers_out)

    return token
