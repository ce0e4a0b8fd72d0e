"""The msgpack wire format of the sync messages (``sync.messages``).

Body (``encode_message``): a msgpack map ``{"v": 1, "type": ..., ["scope": ...,] fields}``
with the dataclass's field names; an optional field that is None, or at its default, is
left out (and read back as its default). Keys this
version does not know are ignored, so that the origin can add an optional field before
every edge knows it; an unknown ``v``, ``type`` or ``scope`` is refused.

Envelope (``encode``/``decode``): ``{"v": 1, "seq": int, "t": published ms, "msg": body}``.

Stream entry of ``edge_sync:{region}`` (``entry_fields``/``decode_entry``): four fields,
``s`` the origin sequence, ``p`` the sequence of the entry before it in the same stream
(0 for the first), ``t`` the publish time in ms (those three ASCII decimal integers) and
``m`` the body. Sequence and time sit beside the body rather than inside it because the
publisher's Lua script assigns the sequence within Redis, atomically with the XADDs, and
Lua cannot be trusted to rewrite our msgpack.

Decoding is strict: anything that is not exactly one message (garbage, trailing bytes, a
missing or ill-typed field, an empty id, a negative count, a price that is not a finite
non-negative number) raises ``MalformedMessage`` naming the problem.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from enum import Enum
from typing import Any

import msgpack

from sync.exceptions import MalformedMessage
from sync.messages import (
    CatalogChange,
    Envelope,
    InvalidateKey,
    InvalidateSegment,
    InvalidateUser,
    ItemPosteriors,
    ItemsChanged,
    ItemUpdate,
    Message,
    ModelEpoch,
    PurgeTag,
    UserUpdate,
)

CODEC_VERSION = 1

# Stream entry fields.
SEQ_FIELD = b"s"
PREV_FIELD = b"p"
TIME_FIELD = b"t"
BODY_FIELD = b"m"


# --- field rules ---------------------------------------------------------------------


class _Kind(Enum):
    ID = "a non-empty string"
    TEXT = "a string"
    COUNT = "a non-negative integer"
    FLAG = "a boolean"
    PRICE = "a finite non-negative number"
    BYTES = "a non-empty byte string"
    IDS = "a list of non-empty strings"


def _checked(kind: _Kind, name: str, value: object) -> Any:
    """``value`` as the field holds it, or MalformedMessage naming the field."""
    ok: bool
    if kind is _Kind.ID:
        ok = isinstance(value, str) and value != ""
    elif kind is _Kind.TEXT:
        ok = isinstance(value, str)
    elif kind is _Kind.COUNT:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    elif kind is _Kind.FLAG:
        ok = isinstance(value, bool)
    elif kind is _Kind.BYTES:
        ok = isinstance(value, bytes) and value != b""
    elif kind is _Kind.IDS:
        ok = isinstance(value, list | tuple) and all(isinstance(v, str) and v for v in value)
        if ok and isinstance(value, list | tuple):  # msgpack reads a list
            value = tuple(value)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        ok = math.isfinite(value) and value >= 0
        value = float(value)
    else:
        ok = False
    if not ok:
        raise MalformedMessage(f"field {name!r} is not {kind.value}: {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class _Wire:
    type: str
    scope: str | None
    build: Callable[..., Message]
    # (field name, kind, optional)
    fields: tuple[tuple[str, _Kind, bool], ...]


_ID, _TEXT, _COUNT, _FLAG, _PRICE = _Kind.ID, _Kind.TEXT, _Kind.COUNT, _Kind.FLAG, _Kind.PRICE
_BYTES, _IDS = _Kind.BYTES, _Kind.IDS

_WIRE: dict[type[Any], _Wire] = {
    UserUpdate: _Wire(
        "user_update",
        None,
        UserUpdate,
        (
            ("user_id", _ID, False),
            ("version", _COUNT, False),
            ("segment", _ID, True),
            ("model", _BYTES, True),
            ("preferences", _BYTES, True),
            ("preferences_version", _COUNT, True),
        ),
    ),
    InvalidateUser: _Wire(
        "invalidate", "user", InvalidateUser, (("user_id", _ID, False), ("reason", _TEXT, False))
    ),
    InvalidateSegment: _Wire(
        "invalidate", "segment", InvalidateSegment, (("segment", _ID, False),)
    ),
    InvalidateKey: _Wire("invalidate", "key", InvalidateKey, (("key", _ID, False),)),
    PurgeTag: _Wire("purge_tag", None, PurgeTag, (("tag", _ID, False), ("soft", _FLAG, False))),
    ItemUpdate: _Wire(
        "item_update",
        None,
        ItemUpdate,
        (
            ("item_id", _ID, False),
            ("in_stock", _FLAG, True),
            ("price", _PRICE, True),
            ("removed", _FLAG, True),
        ),
    ),
    ModelEpoch: _Wire(
        "model_epoch",
        None,
        ModelEpoch,
        (("epoch", _COUNT, False), ("model_version", _ID, False), ("policy", _BYTES, True)),
    ),
    ItemPosteriors: _Wire(
        "item_posteriors",
        None,
        ItemPosteriors,
        (("cell", _ID, False), ("item_ids", _IDS, False), ("rows", _BYTES, False)),
    ),
    ItemsChanged: _Wire(
        "items_changed",
        None,
        ItemsChanged,
        (("version", _COUNT, False), ("item_ids", _IDS, True)),
    ),
    CatalogChange: _Wire(
        "catalog_change",
        None,
        CatalogChange,
        (
            ("origin", _ID, False),
            ("version", _COUNT, False),
            ("slot", _ID, True),
            ("item_ids", _IDS, True),
        ),
    ),
}
_BY_TAG: dict[tuple[object, object], _Wire] = {(w.type, w.scope): w for w in _WIRE.values()}
_TYPE_OF: dict[tuple[str, str | None], type[Any]] = {(w.type, w.scope): t for t, w in _WIRE.items()}
# Each message's fields that have a default: left out of a body when at it.
_DEFAULTS: dict[type[Any], dict[str, Any]] = {
    t: {f.name: f.default for f in fields(t) if f.default is not MISSING} for t in _WIRE
}
_SCOPED = {w.type for w in _WIRE.values() if w.scope is not None}


# --- bodies --------------------------------------------------------------------------


def _body_doc(message: Message) -> dict[str, Any]:
    wire = _WIRE.get(type(message))
    if wire is None:
        raise MalformedMessage(f"not a sync message: {type(message).__name__}")
    doc: dict[str, Any] = {"v": CODEC_VERSION, "type": wire.type}
    if wire.scope is not None:
        doc["scope"] = wire.scope
    defaults = _DEFAULTS[type(message)]
    for name, kind, optional in wire.fields:
        value = getattr(message, name)
        if optional and (value is None or (name in defaults and value == defaults[name])):
            continue
        doc[name] = _checked(kind, name, value)
    return doc


def _message_of(doc: object) -> Message:
    if not isinstance(doc, dict):
        raise MalformedMessage(f"message is not a map but {type(doc).__name__}")
    if doc.get("v") != CODEC_VERSION:
        raise MalformedMessage(f"unknown codec version {doc.get('v')!r}")
    kind = doc.get("type")
    scope = doc.get("scope") if kind in _SCOPED else None
    wire = _BY_TAG.get((kind, scope))
    if wire is None:
        what = f"type {kind!r}" if kind not in _SCOPED else f"{kind} scope {scope!r}"
        raise MalformedMessage(f"unknown message {what}")
    values: dict[str, Any] = {}
    defaults = _DEFAULTS[_TYPE_OF[wire.type, wire.scope]]
    for name, field_kind, optional in wire.fields:
        value = doc.get(name)
        if value is None:
            if not optional:
                raise MalformedMessage(f"{wire.type}: field {name!r} is missing")
            values[name] = defaults.get(name)
            continue
        values[name] = _checked(field_kind, name, value)
    return wire.build(**values)


def _unpack(raw: bytes) -> object:
    if not isinstance(raw, bytes):
        raise MalformedMessage(f"expected bytes, got {type(raw).__name__}")
    try:
        return msgpack.unpackb(raw, raw=False)
    except msgpack.ExtraData as exc:
        raise MalformedMessage("trailing bytes after the message") from exc
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise MalformedMessage(f"not msgpack: {exc}") from exc


def encode_message(message: Message) -> bytes:
    """The body of ``message`` (stream field ``m``)."""
    return msgpack.packb(_body_doc(message), use_bin_type=True)


def decode_message(raw: bytes) -> Message:
    return _message_of(_unpack(raw))


# --- envelopes -----------------------------------------------------------------------


def _check_envelope(seq: object, published_at_ms: object) -> tuple[int, int]:
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise MalformedMessage(f"seq is not a positive integer: {seq!r}")
    return seq, _checked(_COUNT, "published_at_ms", published_at_ms)


def encode(envelope: Envelope) -> bytes:
    seq, at = _check_envelope(envelope.seq, envelope.published_at_ms)
    doc = {"v": CODEC_VERSION, "seq": seq, "t": at, "msg": _body_doc(envelope.message)}
    return msgpack.packb(doc, use_bin_type=True)


def decode(raw: bytes) -> Envelope:
    doc = _unpack(raw)
    if not isinstance(doc, dict):
        raise MalformedMessage(f"envelope is not a map but {type(doc).__name__}")
    if doc.get("v") != CODEC_VERSION:
        raise MalformedMessage(f"unknown codec version {doc.get('v')!r}")
    seq, at = _check_envelope(doc.get("seq"), doc.get("t"))
    if "msg" not in doc:
        raise MalformedMessage("envelope has no 'msg'")
    return Envelope(seq, at, _message_of(doc["msg"]))


# --- stream entries ------------------------------------------------------------------

_DECIMAL = re.compile(rb"0|[1-9][0-9]{0,18}")


def _integer_field(fields: Mapping[bytes, bytes], name: bytes) -> int:
    value = fields.get(name)
    if value is None:
        raise MalformedMessage(f"entry has no field {name.decode()!r}")
    if not isinstance(value, bytes) or _DECIMAL.fullmatch(value) is None:
        raise MalformedMessage(f"entry field {name.decode()!r} is not a decimal: {value!r}")
    return int(value)


def entry_fields(envelope: Envelope, prev_seq: int) -> dict[bytes, bytes]:
    """The fields the publisher's script writes for ``envelope`` (tests and tools use this;
    the script builds the same fields in Lua)."""
    seq, at = _check_envelope(envelope.seq, envelope.published_at_ms)
    return {
        SEQ_FIELD: str(seq).encode(),
        PREV_FIELD: str(prev_seq).encode(),
        TIME_FIELD: str(at).encode(),
        BODY_FIELD: encode_message(envelope.message),
    }


def decode_entry(fields: Mapping[bytes, bytes]) -> tuple[Envelope, int]:
    """The envelope of a stream entry and the sequence of the entry before it."""
    seq = _integer_field(fields, SEQ_FIELD)
    prev = _integer_field(fields, PREV_FIELD)
    at = _integer_field(fields, TIME_FIELD)
    _check_envelope(seq, at)
    if prev >= seq:
        raise MalformedMessage(f"entry's previous sequence {prev} is not below its own {seq}")
    body = fields.get(BODY_FIELD)
    if body is None:
        raise MalformedMessage("entry has no field 'm'")
    return Envelope(seq, at, decode_message(body)), prev
