"""The reward log: what each served answer earned, once its join closed
(``origin.worker.joins``), beside the decision log (``protocol.decisions``) that says what
was shown and how likely each shown item was. The two, joined by ``request_id``, are what
offline evaluation estimates a candidate policy from (``evaluation``).

A record: the request id and user, when the join closed, each engaged item's best grade
(``protocol.actions``: a click 0.25 ... a purchase 1.0, or the client's override) and the
dismissed items. Items shown and not named were left alone. Written once per close; a
worker that died mid-close may leave a second record of the same request, so readers keep
one per ``request_id``.

Body: a msgpack map ``{"v": 1, "request_id", "user_id", "closed_ms", "engaged":
{item: grade}, "dismissed": [item]}``, decoded strictly (``MalformedMessage`` naming the
field).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgpack

from protocol.exceptions import MalformedMessage
from protocol.packed import unpack_map

REWARD_VERSION = 1
# The stream entry's one field.
REWARD_FIELD = "r"


@dataclass(frozen=True, slots=True)
class Rewarded:
    request_id: str
    user_id: str
    closed_ms: int
    engaged: Mapping[str, float] = field(default_factory=dict)  # item -> grade in (0, 1]
    dismissed: tuple[str, ...] = ()


def encode_reward(r: Rewarded) -> bytes:
    doc: dict[str, Any] = {
        "v": REWARD_VERSION,
        "request_id": r.request_id,
        "user_id": r.user_id,
        "closed_ms": r.closed_ms,
        "engaged": dict(r.engaged),
        "dismissed": list(r.dismissed),
    }
    return msgpack.packb(doc, use_bin_type=True)


def decode_reward(raw: bytes) -> Rewarded:
    doc = unpack_map(raw, "reward", version=REWARD_VERSION)
    ids = [doc.get(name) for name in ("request_id", "user_id")]
    for name, value in zip(("request_id", "user_id"), ids, strict=True):
        if not isinstance(value, str) or not value:
            raise MalformedMessage(f"reward: field {name!r} is not a non-empty string")
    closed = doc.get("closed_ms")
    if not isinstance(closed, int) or isinstance(closed, bool) or closed < 0:
        raise MalformedMessage(f"reward: field 'closed_ms' is not a time in ms: {closed!r}")
    engaged = doc.get("engaged")
    if not isinstance(engaged, dict):
        raise MalformedMessage("reward: field 'engaged' is not a map")
    for item, grade in engaged.items():
        ok = isinstance(item, str) and item and isinstance(grade, int | float)
        if not ok or isinstance(grade, bool) or not math.isfinite(grade) or not 0 < grade <= 1:
            raise MalformedMessage(f"reward: field 'engaged' holds {item!r}: {grade!r}")
    dismissed = doc.get("dismissed")
    if not isinstance(dismissed, list) or not all(isinstance(i, str) and i for i in dismissed):
        raise MalformedMessage("reward: field 'dismissed' is not a list of item ids")
    return Rewarded(
        request_id=ids[0],  # type: ignore[arg-type]
        user_id=ids[1],  # type: ignore[arg-type]
        closed_ms=closed,
        engaged={item: float(grade) for item, grade in engaged.items()},
        dismissed=tuple(dismissed),
    )
