"""A user's state as an edge needs it to rank for them (edge ranking): their model's version and
bytes (``relevance.user_model.model_bytes``; absent for a user without one yet) and their
stated preferences (category -> signed strength). The origin answers it to an edge that
meets a user it holds nothing complete of (``GET /v1/internal/users/{user_id}/state``);
the sync stream keeps both fresh afterwards (``sync.messages.UserUpdate`` carries the
preferences encoded by ``encode_preferences``), and a preference change makes the edge ask
again unless a newer update told it first.

Preferences have their own version: the fencing token of the write that stored them
(``origin.ranking.preferences``; 0 for a user who never stated any). It only grows, so an
edge keeps the preferences of the highest version it heard of and refuses older ones.

Body: a msgpack map ``{"v": 1, "user_id", "version", "model": bytes | nil,
"preferences": {category: strength}, "preferences_version"}``, decoded strictly
(``MalformedMessage`` naming the field); an origin that sends no ``preferences_version``
means 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgpack

from protocol.exceptions import MalformedMessage
from protocol.packed import unpack_map

STATE_VERSION = 1
STATE_MEDIA_TYPE = "application/vnd.perso.user-state+msgpack"


@dataclass(frozen=True, slots=True)
class UserModelWire:
    user_id: str
    version: int  # the user's record version (0: none yet)
    model: bytes | None
    preferences: Mapping[str, float] = field(default_factory=dict)
    preferences_version: int = 0


def encode_user_model(state: UserModelWire) -> bytes:
    doc: dict[str, Any] = {
        "v": STATE_VERSION,
        "user_id": state.user_id,
        "version": state.version,
        "model": state.model,
        "preferences": dict(state.preferences),
        "preferences_version": state.preferences_version,
    }
    return msgpack.packb(doc, use_bin_type=True)


def encode_preferences(preferences: Mapping[str, float]) -> bytes:
    """A user's stated preferences as a sync message carries them: a msgpack map."""
    return msgpack.packb(dict(preferences), use_bin_type=True)


def decode_preferences(raw: bytes) -> dict[str, float]:
    """``encode_preferences``'s map, checked: category -> strength in [-1, 1]."""
    try:
        doc = msgpack.unpackb(raw, raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise MalformedMessage(f"preferences: not msgpack: {exc}") from exc
    return _strengths(doc, "preferences")


def _strengths(preferences: object, what: str) -> dict[str, float]:
    if not isinstance(preferences, dict):
        raise MalformedMessage(f"{what}: field 'preferences' is not a map")
    for category, strength in preferences.items():
        ok = isinstance(category, str) and category and isinstance(strength, int | float)
        if not ok or isinstance(strength, bool) or not math.isfinite(strength) or abs(strength) > 1:
            raise MalformedMessage(f"{what}: field 'preferences' holds {category!r}: {strength!r}")
    return {c: float(s) for c, s in preferences.items()}


def decode_user_model(raw: bytes) -> UserModelWire:
    doc = unpack_map(raw, "user state", version=STATE_VERSION)
    user_id = doc.get("user_id")
    if not isinstance(user_id, str) or not user_id:
        raise MalformedMessage("user state: field 'user_id' is not a non-empty string")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise MalformedMessage(f"user state: field 'version' is not a count: {version!r}")
    model = doc.get("model")
    if model is not None and (not isinstance(model, bytes) or not model):
        raise MalformedMessage("user state: field 'model' is not bytes")
    preferences = _strengths(doc.get("preferences"), "user state")
    preferences_version = doc.get("preferences_version", 0)
    if (
        not isinstance(preferences_version, int)
        or isinstance(preferences_version, bool)
        or preferences_version < 0
    ):
        raise MalformedMessage(
            f"user state: field 'preferences_version' is not a count: {preferences_version!r}"
        )
    return UserModelWire(user_id, version, model, preferences, preferences_version)
