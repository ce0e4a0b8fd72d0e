"""A known user's model (and stated preferences) for the edge to rank for them
(``edge.serve.pool_answer``): the edge's user table's (``edge.ranking.user_models``), kept
fresh by the sync stream; a user the edge holds nothing complete of costs one small origin
call (``OriginClient.user_model``), once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from edge.exceptions import OriginRejected, OriginUnavailable
from edge.node import Edge
from edge.ranking.user_models import HeldModel
from protocol.exceptions import MalformedMessage
from relevance.user_model import UserModel, model_from_bytes

log = logging.getLogger(__name__)


async def user_model(
    edge: Edge, user_id: str, may_fetch: Callable[[], Awaitable[bool]]
) -> tuple[HeldModel | None, bool]:
    """The user's model and preferences: held, or asked of the origin once (None when it
    cannot answer or the user may not cost it a call now: the origin ranks then); and
    whether the request waited for the origin for them (its own fetch or another request's
    of the same user)."""
    table = edge.user_models
    assert table is not None
    held = table.ready(user_id)
    if held is not None:
        return held, False
    if not await may_fetch():
        return None, False

    async def fetch() -> HeldModel:
        wire = await edge.origin.user_model(user_id)
        model = (
            model_from_bytes(wire.model, table.dim)
            if wire.model is not None
            else UserModel.prior(table.dim, edge.user_prior_scale)
        )
        edge.counters.user_fetches += 1
        return table.complete(
            user_id, wire.version, model, wire.preferences, wire.preferences_version
        )

    try:
        state, _ = await edge.state_coalescer.run(user_id, fetch, wait_s=edge.coalesce_wait_s)
    except (OriginRejected, OriginUnavailable, MalformedMessage) as exc:
        log.info("state of %s not fetched, the origin ranks instead: %s", user_id, exc)
        return None, True
    if state.preferences is None:
        return None, True  # read before a preference change that came since: asked again
    return state, True
