"""Where a personalize request's answer lives and how it gets there: the key (the segment cache key,
``edge.cache.key``, made for the request's audience), the lookup (fresh, in its refresh
window, stale, or gone; never an entry for another audience), and the fill from the
origin: one per key at a time (``edge.cache.coalesce`` in the process, ``edge.cache.fill_lease``
among the processes of a PoP that share a store), stamped with its generation, a
background refresh ahead of expiry (stale-while-revalidate), and the pre-warm of a power
or active user's next entry.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from edge.cache.entry import CachedItem, Entry
from edge.cache.freshness import Freshness, freshness
from edge.cache.key import (
    CacheKey,
    audience_for,
    bucketed_options,
    cache_key,
    variant,
)
from edge.exceptions import AudienceMismatch, OriginRejected, OriginUnavailable
from edge.geo import geo_bucket
from edge.node import Edge
from edge.origins.answers import Personalized
from invalidation.rules import item_tag, segment_tag, user_tag
from invalidation.ttl import entry_lifetime, ttl_for
from protocol.api import MAX_COUNT, Constraints, PersonalizeRequest, RankedItem
from protocol.audience import Personal, Shared
from protocol.pools import Pool
from protocol.segments import Segment, more_engaged

log = logging.getLogger(__name__)


async def fill(
    edge: Edge,
    body: PersonalizeRequest,
    keyed: Keyed,
    *,
    generation: int,
) -> Entry:
    """Ask the origin for the answer of ``keyed`` (for its audience) and store it.

    A fill asks for more items than the request, without its exclusions, with
    explanations and with the key's bucketed options, so that it can serve every request of
    the key. A request that excludes more than one fill can hold is answered for itself
    instead (its exclusions go to the origin) and not stored; so is an answer the origin
    marks degraded. The entry is for the audience the origin says it built the answer for,
    and tagged with its items, its segment and, when personal, its user (for purges); a
    store refuses it under a key of another audience, and then it is only served to the
    user who asked.
    """
    constraints = body.constraints
    shareable = shareable_request(body)
    if shareable:
        want = max(edge.fill_items, constraints.count + len(constraints.exclude_items))
        constraints = constraints.model_copy(update={"count": want, "exclude_items": []})
    else:
        want = constraints.count
    filled = await edge.origin.personalize(
        as_fill(body, constraints), audience=keyed.key.audience, logged_by=edge.served_by
    )
    edge.counters.fills += 1
    audience = filled.audience
    tags = (user_tag(audience.user_id),) if isinstance(audience, Personal) else ()
    entry = filled_entry(
        edge,
        filled,
        keyed,
        generation,
        complete=not shareable or len(filled.answer.items) < want,
        extra_tags=tags,
    )
    if shareable:
        await store_filled(edge, keyed, entry)
    return entry


def filled_entry(
    edge: Edge,
    filled: Personalized,
    keyed: Keyed,
    generation: int,
    *,
    complete: bool,
    extra_tags: tuple[str, ...] = (),
    pool: Pool | None = None,
) -> Entry:
    """The entry an origin's answer to a fill of ``keyed`` makes, filled now: its items
    (those the catalog deleted meanwhile left out, with their propensities), its lifetime,
    tagged with every item it holds (the pool's, with a pool) and its segment, plus
    ``extra_tags``."""
    answer = filled.answer
    now = edge.clock()
    ranked, propensities = still_in_catalog(edge, filled)
    items = tuple(CachedItem.of(item) for item in ranked)
    held = pool.item_ids if pool is not None else [item.item_id for item in items]
    fresh_s, servable_s = entry_lifetime(keyed.ttl, edge.stale_if_error_s, items=len(held))
    return Entry(
        items=items,
        complete=complete,
        model_version=answer.metadata.model_version,
        exploration_applied=answer.metadata.exploration_applied,
        filled_at=now,
        expires_at=now + fresh_s,
        stale_until=now + servable_s,
        degraded=answer.metadata.degraded,
        generation=generation,
        tags=(*(item_tag(i) for i in held), segment_tag(keyed.segment.value), *extra_tags),
        audience=filled.audience,
        scores=tuple(item.score for item in ranked),
        propensities=propensities,
        context=filled.context,
        policy=filled.policy,
        pool=pool,
        ranking_id=answer.request_id,
    )


async def store_filled(edge: Edge, keyed: Keyed, entry: Entry) -> None:
    """Store a fill's entry under ``keyed``, unless the origin marked it degraded (served
    once, never cached); a store refusing it for another audience is counted and logged."""
    if entry.degraded:
        return
    try:
        await edge.store.put(keyed.key, entry)
    except AudienceMismatch as exc:
        edge.counters.audience_refused += 1
        log.error("fill not stored: %s", exc)


def as_fill(body: PersonalizeRequest, constraints: Constraints) -> PersonalizeRequest:
    """``body`` as a fill asks the origin for it: with ``constraints``, explanations, and the
    key's bucketed options."""
    options = bucketed_options(body.options).model_copy(update={"include_explanation": True})
    return body.model_copy(update={"constraints": constraints, "options": options})


def still_in_catalog(
    edge: Edge, filled: Personalized
) -> tuple[list[RankedItem], tuple[float, ...]]:
    """The fill's items and their propensities, but those the catalog deleted while the
    fill was on its way."""
    items = filled.answer.items
    kept = edge.removed.kept(item.item_id for item in items)
    propensities = filled.propensities
    if len(kept) < len(items) and len(propensities) == len(items):
        propensities = tuple(propensities[n] for n in kept)
    return [items[n] for n in kept], propensities


def shareable_request(body: PersonalizeRequest) -> bool:
    constraints = body.constraints
    return constraints.count + len(constraints.exclude_items) <= MAX_COUNT


def servable_to(entry: Entry, user_id: str) -> bool:
    """May ``user_id`` be served ``entry``? A segment's answer: yes; a user's: only them."""
    audience = entry.audience
    return isinstance(audience, Shared) or audience.user_id == user_id


async def coalesced_fill(edge: Edge, body: PersonalizeRequest, keyed: Keyed) -> Entry:
    """``fill`` once per key at a time (followers wait for it, bounded), and once per PoP
    with a PoP store; stamped with its generation when it starts, so that a slower, older
    fill never replaces a newer one. A follower gets the leader's answer only when it may
    be served it (an origin that answered for the leader alone answers each follower)."""
    generation = edge.store.next_generation()
    count, exclude = body.constraints.count, body.constraints.exclude_items

    def fill_here() -> Awaitable[Entry]:
        return fill(edge, body, keyed, generation=generation)

    entry, led = await edge.coalescer.run(
        keyed.key.digest,
        lambda: once_per_pop(
            edge,
            keyed,
            body.user_id,
            fill_here,
            serves=lambda stored: stored.select(count, exclude) is not None,
        ),
        wait_s=edge.coalesce_wait_s,
    )
    if led or servable_to(entry, body.user_id):
        return entry
    return await fill(edge, body, keyed, generation=edge.store.next_generation())


async def once_per_pop(
    edge: Edge,
    keyed: Keyed,
    user_id: str,
    fill_here: Callable[[], Awaitable[Entry]],
    *,
    serves: Callable[[Entry], bool],
) -> Entry:
    """``fill_here()``, unless another edge process of the PoP fills ``keyed`` now or just
    did (``edge.cache.fill_lease``): then the entry it stores, once it is there, fresh (not in
    its refresh window: a background refresh must not take the entry it refreshes for
    its result) and ``serves`` this fill's purpose, as ``user_id``'s lookup finds it.
    Without a PoP store, ``fill_here()``."""
    leases = edge.fill_leases
    if leases is None:
        return await fill_here()

    async def stored() -> Entry | None:
        entry, state = await lookup(edge, keyed.key, edge.clock(), user_id)
        if entry is None or state is not Freshness.FRESH or not serves(entry):
            return None
        return entry

    return await leases.run(keyed.key.digest, fill_here, stored)


def refresh_in_background(edge: Edge, body: PersonalizeRequest, keyed: Keyed) -> None:
    in_background(edge, keyed.key.digest, lambda: coalesced_fill(edge, body, keyed))


def in_background(edge: Edge, digest: str, refill: Callable[[], Awaitable[Entry]]) -> None:
    """Run ``refill`` of the key ``digest`` in the background (stale-while-revalidate),
    unless one is running already; a failure keeps the entry there is."""
    if digest in edge._refreshing:
        return
    edge._refreshing.add(digest)
    edge.counters.revalidations += 1

    async def refresh() -> None:
        try:
            await refill()
        except (OriginUnavailable, OriginRejected) as exc:
            log.info("background refresh failed, entry kept: %s", exc)
        except Exception:
            log.exception("background refresh failed")
        finally:
            edge._refreshing.discard(digest)

    task = asyncio.get_running_loop().create_task(refresh())
    edge._background.add(task)
    task.add_done_callback(edge._background.discard)


@dataclass(frozen=True)
class Keyed:
    """Where a request's answer lives (its key, made for its audience), and how long a
    fill of it may be kept."""

    key: CacheKey
    parts: dict[str, Any]  # cache_key's arguments but the time
    segment: Segment
    ttl: float


def known_segment(seen: Segment, token_segment: Segment) -> Segment:
    """The user's segment: the more engaged of what the feedback the edge saw of them says
    and what their token says (the origin's count when it was issued). Both count too few:
    the edge sees only the feedback that passed through it (a power user's first click
    today at this edge, or a region with several edges), the token is up to its lifetime
    old; neither lets a power user be treated as casual."""
    return more_engaged(seen, token_segment)


def key_of(edge: Edge, body: PersonalizeRequest, token_segment: Segment, now: float) -> Keyed:
    """The segment cache key for ``body``: the segment from what the edge saw of the user (their
    token's when it saw nothing; casual at least when the edge holds their model: their
    signal came through another edge) and with it the audience (every user with a signal:
    the user, even when the edge knows none of their interactions), their last items, the
    request's context."""
    user = edge.views.snapshot(body.user_id)
    segment = known_segment(user.segment, token_segment)
    if segment is Segment.NEW and edge.user_models is not None and body.user_id in edge.user_models:
        segment = Segment.CASUAL
    parts: dict[str, Any] = {
        "audience": audience_for(segment, body.user_id),
        "page_type": body.context.page_type.value,
        "segment": segment.value,
        "geo": geo_bucket(body.context.geo, edge.default_geo),
        "device": body.context.device.value,
        "recent_items": user.recent_items,
        "variant_parts": variant(body),
    }
    ttl = ttl_for(segment, since_interaction_s=user.since_interaction_s, policy=edge.ttl)
    return Keyed(cache_key(now_s=now, **parts), parts, segment, ttl)


async def lookup(
    edge: Edge, key: CacheKey, now: float, user_id: str
) -> tuple[Entry | None, Freshness]:
    """The key's entry and how it may be used now (soft purges make it stale); none when
    ``user_id`` may not be served it."""
    entry = await edge.store.get(key)
    if entry is None or not servable_to(entry, user_id):
        return None, Freshness.GONE
    state = freshness(
        now, filled_at=entry.filled_at, expires_at=entry.expires_at, stale_until=entry.stale_until
    )
    if state is not Freshness.GONE and edge.staleness.is_stale(entry):
        state = Freshness.STALE  # soft-purged: a model epoch, a gap, a soft tag purge
    return entry, state


async def prewarm(edge: Edge, body: PersonalizeRequest) -> bool:
    """Fill the key ``body`` would have now, unless it is already fresh (``edge.cache.prewarm``).
    Runs after the settle window, so the fill is ranked from the updated embedding."""
    if not shareable_request(body):
        return False
    now = edge.clock()
    keyed = key_of(edge, body, Segment.NEW, now)
    entry, state = await lookup(edge, keyed.key, now, body.user_id)
    if entry is not None and state in (Freshness.FRESH, Freshness.REVALIDATE):
        return False
    await coalesced_fill(edge, body, keyed)
    return True
