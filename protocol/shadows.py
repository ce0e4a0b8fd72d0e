"""The shadow log: for a sample of the decisions the origin ranks, what a shadow
policy (``PERSO_SHADOW_POLICY``) would have shown instead, and how likely each policy was to
show what was shown, computed beside the live ranking and off its path
(``origin.offline.shadow``).

A record is self-contained, so that comparing the two needs only the reward log beside it
(``protocol.rewards``, joined by ``request_id``):

- ``request_id``, ``user_id``, ``at_ms``; ``policy`` (the shadow's label) and ``live`` (the
  live policy's label);
- ``shown``: the items the live policy showed, in position order, with ``live_p`` (the live
  policy's propensity of each there, replayed on the context with the shadow's number of
  runs) and ``shadow_p`` (the shadow's);
- ``would_show``: the slate the shadow would have served, with ``would_p``, each item's
  propensity there under the shadow.

Body: a msgpack map led by ``"v"``, decoded strictly (``MalformedMessage`` naming the
field).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import msgpack

from protocol.exceptions import MalformedMessage
from protocol.packed import unpack_map

SHADOW_VERSION = 1


@dataclass(frozen=True, slots=True)
class ShadowDecision:
    request_id: str
    user_id: str
    at_ms: int
    policy: str
    live: str
    shown: tuple[str, ...]
    live_p: tuple[float, ...]
    shadow_p: tuple[float, ...]
    would_show: tuple[str, ...]
    would_p: tuple[float, ...]


def encode_shadow(s: ShadowDecision) -> bytes:
    doc: dict[str, Any] = {
        "v": SHADOW_VERSION,
        "request_id": s.request_id,
        "user_id": s.user_id,
        "at_ms": s.at_ms,
        "policy": s.policy,
        "live": s.live,
        "shown": list(s.shown),
        "live_p": [float(p) for p in s.live_p],
        "shadow_p": [float(p) for p in s.shadow_p],
        "would_show": list(s.would_show),
        "would_p": [float(p) for p in s.would_p],
    }
    packed: bytes = msgpack.packb(doc, use_bin_type=True)
    return packed


def decode_shadow(raw: bytes) -> ShadowDecision:
    doc = unpack_map(raw, "shadow decision", version=SHADOW_VERSION)
    for name in ("request_id", "user_id", "policy", "live"):
        if not isinstance(doc.get(name), str) or not doc[name]:
            raise MalformedMessage(f"shadow decision: field {name!r} is not a non-empty string")
    if type(doc.get("at_ms")) is not int or doc["at_ms"] < 0:
        raise MalformedMessage("shadow decision: field 'at_ms' is not a non-negative integer")
    shown = _ids(doc, "shown")
    would = _ids(doc, "would_show")
    return ShadowDecision(
        request_id=doc["request_id"],
        user_id=doc["user_id"],
        at_ms=doc["at_ms"],
        policy=doc["policy"],
        live=doc["live"],
        shown=shown,
        live_p=_probabilities(doc, "live_p", len(shown)),
        shadow_p=_probabilities(doc, "shadow_p", len(shown)),
        would_show=would,
        would_p=_probabilities(doc, "would_p", len(would)),
    )


def _ids(doc: dict[Any, Any], name: str) -> tuple[str, ...]:
    value = doc.get(name)
    if not isinstance(value, list) or not all(isinstance(i, str) and i for i in value):
        raise MalformedMessage(f"shadow decision: field {name!r} is not a list of ids")
    return tuple(value)


def _probabilities(doc: dict[Any, Any], name: str, n: int) -> tuple[float, ...]:
    value = doc.get(name)
    if (
        not isinstance(value, list)
        or len(value) != n
        or not all(type(p) is float and math.isfinite(p) and 0.0 <= p <= 1.0 for p in value)
    ):
        raise MalformedMessage(f"shadow decision: field {name!r} is not {n} probabilities")
    return tuple(value)
