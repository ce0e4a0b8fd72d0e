"""The segment cache key: the key under which an edge caches an answer, for its audience.

    key = sha256(audience : page_type : segment : geo_bucket : device : time_bucket
                 : recent : variant)

A key is made for an audience (``protocol.audience``) and carries it: ``Shared(segment)``
keys name no user and may hold only shared answers; ``Personal(user)`` keys always contain
the user, whatever the edge knows of their history, and may hold only that user's answers
(``edge.cache.store`` refuses anything else). The audience comes from what is known of the
user: every user with a signal (a click, a dismiss, a model record; any segment but
``new``) gets personal answers, ranked by their own model; only users with nothing known
share their segment's.

``time_bucket`` is the edge's clock floored to 15 minutes (not the client's timestamp,
which anyone could set to split the cache). ``recent`` is the user's last 5 interacted item
ids, sorted, for personal keys only: an answer ranked before a click is not served after
it. ``variant`` is what in the request's filters and options changes the answer.

Every component is written length-prefixed (``encode``) before hashing, so no two
different sets of components make the same key: a category named ``"a,b"`` is not the
categories ``"a"`` and ``"b"``. Ranking options enter the key bucketed to
``OPTION_STEP`` (and the fill asks the origin for exactly the bucketed value), so a client
that varies ``exploration_rate`` per request finds the same few keys instead of forcing a
new fill each time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from protocol.api import Options, PersonalizeRequest
from protocol.audience import Audience, Personal, Shared
from protocol.segments import Segment, is_known

TIME_BUCKET_S = 900
RECENT_ITEMS = 5
# Ranking options are served on a grid of this step (21 values from 0 to 1).
OPTION_STEP = 0.05
_KEY_VERSION = "k2"
_POOL_KEY_VERSION = "p1"


@dataclass(frozen=True, slots=True)
class CacheKey:
    """Where an answer for ``audience`` lives; ``digest`` is what stores index by."""

    digest: str
    audience: Audience


def time_bucket(now_s: float) -> int:
    return int(now_s // TIME_BUCKET_S) * TIME_BUCKET_S


def encode(parts: Iterable[str]) -> bytes:
    """Components as ``<length>:<text>`` one after another: unambiguous for any text."""
    out = bytearray()
    for part in parts:
        raw = part.encode("utf-8")
        out += b"%d:%b" % (len(raw), raw)
    return bytes(out)


def bucketed(value: float | None) -> float | None:
    """``value`` on the ``OPTION_STEP`` grid (nearest point), None kept."""
    if value is None:
        return None
    return round(round(value / OPTION_STEP) * OPTION_STEP, 4)


def bucketed_options(options: Options) -> Options:
    """``options`` with the ranking options the key buckets, as a fill asks for them."""
    rate, weight = bucketed(options.exploration_rate), bucketed(options.diversity_weight)
    if rate == options.exploration_rate and weight == options.diversity_weight:
        return options
    return options.model_copy(update={"exploration_rate": rate, "diversity_weight": weight})


def _number(value: float | None) -> str:
    return "" if value is None else repr(value)


def variant(request: PersonalizeRequest) -> tuple[str, ...]:
    """What in a request changes the ranked list besides the key's context: its category
    filter (a set: order and repeats do not matter), price bounds and bucketed options."""
    constraints, options = request.constraints, request.options
    price = constraints.price_range
    categories = sorted(set(constraints.categories)) if constraints.categories else []
    return (
        str(len(categories)),
        *categories,
        _number(None if price is None else price.min),
        _number(None if price is None else price.max),
        _number(bucketed(options.exploration_rate)),
        _number(bucketed(options.diversity_weight)),
    )


def _audience_parts(audience: Audience) -> tuple[str, str]:
    if isinstance(audience, Personal):
        return ("user", audience.user_id)
    return ("shared", audience.segment)


def key_material(
    *,
    audience: Audience,
    page_type: str,
    segment: str,
    geo: str,
    device: str,
    now_s: float,
    recent_items: Sequence[str],
    variant_parts: Sequence[str],
) -> bytes:
    """The bytes a key hashes: every component, length-prefixed (tested for injectivity)."""
    recent = sorted(recent_items[-RECENT_ITEMS:]) if isinstance(audience, Personal) else []
    return encode(
        (
            _KEY_VERSION,
            *_audience_parts(audience),
            page_type,
            segment,
            geo,
            device,
            str(time_bucket(now_s)),
            str(len(recent)),
            *recent,
            str(len(variant_parts)),
            *variant_parts,
        )
    )


def cache_key(
    *,
    audience: Audience,
    page_type: str,
    segment: str,
    geo: str,
    device: str,
    now_s: float,
    recent_items: Sequence[str],
    variant_parts: Sequence[str] = (),
) -> CacheKey:
    material = key_material(
        audience=audience,
        page_type=page_type,
        segment=segment,
        geo=geo,
        device=device,
        now_s=now_s,
        recent_items=recent_items,
        variant_parts=variant_parts,
    )
    return CacheKey(hashlib.sha256(material).hexdigest(), audience)


def pool_key_material(*, segment: str, device: str, variant_parts: Sequence[str]) -> bytes:
    """The bytes a candidate pool's key hashes (``pool_cache_key``)."""
    return encode((_POOL_KEY_VERSION, segment, device, str(len(variant_parts)), *variant_parts))


def pool_cache_key(*, segment: str, device: str, variant_parts: Sequence[str]) -> CacheKey:
    """Where the candidate pool of ``segment``'s users lives (shared candidate pools): keyed
    by what the origin's ranking for a segment reads of a request, the device (with the time
    of day, the posteriors' context cell) and the variant, and by nothing else: not the page type
    or geo (which only a personal ranking reads, or none), not the user, not the time
    bucket (a pool lives by its TTL, refreshed in the background while it is read). Its own
    key version: a pool's key is never an answer's."""
    material = pool_key_material(segment=segment, device=device, variant_parts=variant_parts)
    return CacheKey(hashlib.sha256(material).hexdigest(), Shared(segment))


def audience_for(segment: Segment, user_id: str) -> Audience:
    """Personal to ``user_id`` when anything is known of them (``is_known``: every segment
    but new), else shared by the segment."""
    return Personal(user_id) if is_known(segment) else Shared(segment.value)
