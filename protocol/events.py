"""Feedback events as they travel through the ``events:{partition}`` streams.

One stream entry per interaction, field ``e`` holding a msgpack map with short keys. The
codec is strict: anything that does not decode into a complete event raises
``MalformedMessage`` so that a consumer can count and skip it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgpack

from protocol.exceptions import MalformedMessage

EVENT_FIELD = b"e"
CODEC_VERSION = 1


@dataclass(frozen=True, slots=True)
class FeedbackEvent:
    interaction_id: str
    user_id: str
    item_id: str
    action: str
    # When the interaction happened (client's timestamp, else when it was accepted).
    timestamp_ms: int
    # When the origin accepted it.
    accepted_ms: int
    session_id: str | None = None
    request_id: str | None = None
    position: int | None = None
    duration_ms: int | None = None
    reward_override: float | None = None


def epoch_ms(moment: datetime) -> int:
    """Milliseconds since the epoch; a moment without a time zone is UTC, never the
    host's local time (which would change interaction ids and decay from host to host)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def derive_interaction_id(
    user_id: str,
    item_id: str,
    action: str,
    *,
    session_id: str | None,
    request_id: str | None,
    timestamp_ms: int | None,
) -> str:
    """Idempotency key for an interaction whose client sent none: the same request sent
    twice gives the same id, so the retry is recognised and not counted again."""
    material = "\x1f".join(
        [user_id, session_id or "", request_id or "", item_id, action, str(timestamp_ms or "")]
    )
    return "ix-" + hashlib.sha256(material.encode("utf-8")).hexdigest()[:32]


_REQUIRED = {"i": str, "u": str, "it": str, "a": str, "t": int, "at": int}
_OPTIONAL = {"s": str, "r": str, "p": int, "d": int, "rw": float}


def encode_event(event: FeedbackEvent) -> bytes:
    doc: dict[str, Any] = {
        "v": CODEC_VERSION,
        "i": event.interaction_id,
        "u": event.user_id,
        "it": event.item_id,
        "a": event.action,
        "t": event.timestamp_ms,
        "at": event.accepted_ms,
    }
    optional = {
        "s": event.session_id,
        "r": event.request_id,
        "p": event.position,
        "d": event.duration_ms,
        "rw": event.reward_override,
    }
    doc.update({k: v for k, v in optional.items() if v is not None})
    return msgpack.packb(doc, use_bin_type=True)


def decode_event(raw: bytes) -> FeedbackEvent:
    try:
        doc = msgpack.unpackb(raw, raw=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise MalformedMessage(f"not msgpack: {exc}") from exc
    if not isinstance(doc, dict):
        raise MalformedMessage(f"expected a map, got {type(doc).__name__}")
    if doc.get("v") != CODEC_VERSION:
        raise MalformedMessage(f"unknown codec version {doc.get('v')!r}")
    for key, kind in _REQUIRED.items():
        if not isinstance(doc.get(key), kind):
            raise MalformedMessage(f"field {key!r} missing or not {kind.__name__}")
    for key, kind in _OPTIONAL.items():
        value = doc.get(key)
        if value is None:
            continue
        if kind is float and isinstance(value, int):
            continue
        if not isinstance(value, kind):
            raise MalformedMessage(f"field {key!r} is not {kind.__name__}")
    rw = doc.get("rw")
    return FeedbackEvent(
        interaction_id=doc["i"],
        user_id=doc["u"],
        item_id=doc["it"],
        action=doc["a"],
        timestamp_ms=doc["t"],
        accepted_ms=doc["at"],
        session_id=doc.get("s"),
        request_id=doc.get("r"),
        position=doc.get("p"),
        duration_ms=doc.get("d"),
        reward_override=float(rw) if rw is not None else None,
    )
