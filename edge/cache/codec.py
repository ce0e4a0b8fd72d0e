"""An edge cache entry as bytes (msgpack), for stores outside the process (a PoP's Redis).

The layout is one msgpack array, led by a format version so that edges of two releases
sharing one Redis during a deploy refuse each other's entries instead of misreading them:

    [5, [[item_id, members, explanation], ...], complete, model_version,
     exploration_applied, expires_at, degraded, filled_at, stale_until, generation, [tags],
     [audience_kind, audience_id], [scores], [propensities], context, policy, pool,
     ranking_id]

``pool`` is the entry's candidate pool as ``protocol.pools.encode_pool`` makes it, or nil.

``audience`` is ``["shared", segment]`` or ``["user", user_id]`` (``protocol.audience``).

Items keep the JSON bytes they are served as, so decoding costs no JSON parsing. Times are
float64, so an entry comes back exactly equal to the one encoded.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

import msgpack

from edge.cache.entry import CachedItem, Entry
from protocol.audience import Audience, Personal, Shared
from protocol.exceptions import MalformedMessage
from protocol.pools import Pool, decode_pool, encode_pool

FORMAT_VERSION = 5
_FIELDS = 18
_SHARED, _USER = "shared", "user"

_T = TypeVar("_T")


def encode_entry(entry: Entry) -> bytes:
    payload = [
        FORMAT_VERSION,
        [[item.item_id, item.members, item.explanation] for item in entry.items],
        entry.complete,
        entry.model_version,
        entry.exploration_applied,
        float(entry.expires_at),
        entry.degraded,
        float(entry.filled_at),
        float(entry.stale_until),
        entry.generation,
        list(entry.tags),
        _audience_fields(entry.audience),
        [float(x) for x in entry.scores],
        [float(x) for x in entry.propensities],
        entry.context,
        entry.policy,
        encode_pool(entry.pool) if entry.pool is not None else None,
        entry.ranking_id,
    ]
    try:
        packed: bytes = msgpack.packb(payload, use_bin_type=True)
    except (OverflowError, TypeError, ValueError) as exc:
        raise ValueError(f"entry cannot be encoded: {exc}") from exc
    return packed


def decode_entry(raw: bytes) -> Entry:
    """The entry ``encode_entry`` made of ``raw``; ValueError for anything else."""
    try:
        payload = msgpack.unpackb(raw, raw=False, use_list=True, strict_map_key=True)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise ValueError(f"not an encoded entry: {exc}") from exc
    if not isinstance(payload, list) or not payload:
        raise ValueError(f"not an encoded entry: {type(payload).__name__} at the top")
    if payload[0] != FORMAT_VERSION or type(payload[0]) is not int:
        raise ValueError(f"unknown entry format {payload[0]!r}, expected {FORMAT_VERSION}")
    if len(payload) != _FIELDS:
        raise ValueError(f"encoded entry has {len(payload)} fields, expected {_FIELDS}")
    (
        _,
        items,
        complete,
        model_version,
        exploration,
        expires_at,
        degraded,
        filled_at,
        stale_until,
        generation,
        tags,
        audience,
        scores,
        propensities,
        context,
        policy,
        pool,
        ranking_id,
    ) = payload
    return Entry(
        items=tuple(_item(raw_item) for raw_item in _of(list, items, "items")),
        complete=_of(bool, complete, "complete"),
        model_version=_of(str, model_version, "model_version"),
        exploration_applied=_of(bool, exploration, "exploration_applied"),
        expires_at=_time(expires_at, "expires_at"),
        degraded=_of(bool, degraded, "degraded"),
        filled_at=_time(filled_at, "filled_at"),
        stale_until=_time(stale_until, "stale_until"),
        generation=_of(int, generation, "generation"),
        tags=tuple(_of(str, tag, "tag") for tag in _of(list, tags, "tags")),
        audience=_audience(audience),
        scores=tuple(_of(float, x, "score") for x in _of(list, scores, "scores")),
        propensities=tuple(
            _of(float, x, "propensity") for x in _of(list, propensities, "propensities")
        ),
        context=_of(str, context, "context"),
        policy=_of(str, policy, "policy"),
        pool=_pool(pool),
        ranking_id=_of(str, ranking_id, "ranking_id"),
    )


def _pool(raw: Any) -> Pool | None:
    if raw is None:
        return None
    try:
        return decode_pool(_of(bytes, raw, "pool"))
    except MalformedMessage as exc:
        raise ValueError(f"encoded entry's pool: {exc}") from exc


def _audience_fields(audience: Audience) -> list[str]:
    if isinstance(audience, Personal):
        return [_USER, audience.user_id]
    return [_SHARED, audience.segment]


def _audience(raw: Any) -> Audience:
    fields = _of(list, raw, "audience")
    if len(fields) != 2:
        raise ValueError(f"encoded audience has {len(fields)} fields, expected 2")
    kind, name = _of(str, fields[0], "audience kind"), _of(str, fields[1], "audience id")
    if kind == _USER:
        return Personal(name)
    if kind == _SHARED:
        return Shared(name)
    raise ValueError(f"unknown audience kind {kind!r}")


def _item(raw: Any) -> CachedItem:
    fields = _of(list, raw, "item")
    if len(fields) != 3:
        raise ValueError(f"encoded item has {len(fields)} fields, expected 3")
    item_id, members, explanation = fields
    return CachedItem(
        _of(str, item_id, "item_id"),
        _of(bytes, members, "item members"),
        _of(bytes, explanation, "item explanation"),
    )


def _time(value: Any, what: str) -> float:
    seconds = _of(float, value, what)
    if not math.isfinite(seconds):
        raise ValueError(f"encoded {what} is {seconds}, expected a finite time")
    return seconds


def _of(kind: type[_T], value: Any, what: str) -> _T:
    # Exact types: msgpack keeps bool apart from int and bytes apart from str, and so do we.
    if type(value) is not kind:
        raise ValueError(f"encoded {what} is {type(value).__name__}, expected {kind.__name__}")
    result: _T = value
    return result
