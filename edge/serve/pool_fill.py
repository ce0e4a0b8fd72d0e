"""The segment's candidate pool as the edge holds it (``edge.serve.pool_answer`` ranks
from it): a shared entry under the key the segment's users share whatever their page, geo
or time bucket (``edge.cache.key.pool_cache_key``), looked up, refreshed in the background
ahead of expiry, else filled by the origin's pool fill (``OriginClient.pools``), coalesced
and once per PoP with a PoP store.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable

from edge.cache.entry import Entry
from edge.cache.freshness import Freshness, refresh_due
from edge.cache.key import pool_cache_key
from edge.exceptions import OriginRejected, OriginUnavailable
from edge.node import Edge
from edge.serve.fill import (
    Keyed,
    as_fill,
    filled_entry,
    in_background,
    lookup,
    once_per_pop,
    store_filled,
)
from invalidation.ttl import ttl_for
from protocol.api import PersonalizeRequest
from protocol.audience import Shared

log = logging.getLogger(__name__)


def pool_key(edge: Edge, keyed: Keyed) -> Keyed:
    """Where the pool of ``keyed``'s segment lives (``edge.cache.key.pool_cache_key``), and
    how long a fill of it is fresh: ``pool_ttl_s``, at most the segment's TTL."""
    parts = keyed.parts
    key = pool_cache_key(
        segment=keyed.segment.value, device=parts["device"], variant_parts=parts["variant_parts"]
    )
    ttl = min(edge.pool_ttl_s, ttl_for(keyed.segment, since_interaction_s=None, policy=edge.ttl))
    return Keyed(key, {**parts, "audience": key.audience, "recent_items": ()}, keyed.segment, ttl)


async def pool_entry(
    edge: Edge,
    body: PersonalizeRequest,
    pooled: Keyed,
    now: float,
    *,
    may_fill: Callable[[], Awaitable[bool]],
) -> tuple[Entry, bool] | None:
    """The entry holding the pool of ``pooled``, and whether it was filled for this request
    (the pool's lookup missed): fresh, refreshed in the background ahead of expiry; else
    filled now, unless the user may not cost the origin a fill or the origin fails (None:
    the origin ranks)."""
    entry, state_of_pool = await lookup(edge, pooled.key, now, body.user_id)
    usable = state_of_pool in (Freshness.FRESH, Freshness.REVALIDATE)
    if entry is not None and entry.pool is not None and usable:
        if refresh_due(state_of_pool, expires_at=entry.expires_at, key_ends_at=math.inf):
            in_background(edge, pooled.key.digest, lambda: coalesced_pool_fill(edge, body, pooled))
        return entry, False
    if not await may_fill():
        return None
    try:
        return await coalesced_pool_fill(edge, body, pooled), True
    except (OriginRejected, OriginUnavailable) as exc:
        log.info("pool fill failed, the origin ranks instead: %s", exc)
        return None


async def pool_fill(edge: Edge, body: PersonalizeRequest, keyed: Keyed, generation: int) -> Entry:
    """Ask the origin for the segment's answer and pool under ``keyed`` and store them."""
    constraints = body.constraints.model_copy(
        update={"count": edge.fill_items, "exclude_items": []}
    )
    audience = keyed.key.audience
    assert isinstance(audience, Shared)
    filled, pool = await edge.origin.pools(
        as_fill(body, constraints), audience=audience, logged_by=edge.served_by
    )
    # Items the catalog deleted while this fill was on its way are left out of both.
    pool = pool.without({i for i in pool.item_ids if i in edge.removed})
    complete = len(filled.answer.items) < edge.fill_items
    entry = filled_entry(edge, filled, keyed, generation, complete=complete, pool=pool)
    edge.counters.pool_fills += 1
    await store_filled(edge, keyed, entry)
    return entry


async def coalesced_pool_fill(edge: Edge, body: PersonalizeRequest, keyed: Keyed) -> Entry:
    """``pool_fill`` once per key at a time, and once per PoP with a PoP store; a pool is
    anyone's of the segment."""
    generation = edge.store.next_generation()

    def fill_here() -> Awaitable[Entry]:
        return pool_fill(edge, body, keyed, generation)

    entry, _ = await edge.coalescer.run(
        keyed.key.digest,
        lambda: once_per_pop(
            edge, keyed, body.user_id, fill_here, serves=lambda stored: stored.pool is not None
        ),
        wait_s=edge.coalesce_wait_s,
    )
    return entry
