"""Sync messages: what the origin tells every edge (and the origins one another), and
their msgpack wire format.

==================  ======================  ============================================
class               wire ``type`` / scope   meaning at the edge
==================  ======================  ============================================
UserUpdate          user_update             the user's model (version; its bytes) or segment moved
InvalidateUser      invalidate / user       drop the user's entries (purchase, preference)
InvalidateSegment   invalidate / segment    drop every entry of a segment
InvalidateKey       invalidate / key        drop one cache key
PurgeTag            purge_tag               drop (soft: mark stale) entries tagged ``tag``
ItemUpdate          item_update             an item's stock or price changed, or it was
                                            deleted from the catalog (``removed``)
ModelEpoch          model_epoch             a new model or ranking policy is live: older
                                            entries are stale; the edge ranks by the policy
ItemPosteriors      item_posteriors         the workers changed some items' posteriors in a
                                            context cell: the pools the edge ranks from
                                            take them (``edge.ranking.live_posteriors``)
ItemsChanged        items_changed           the catalog ingested, changed or deleted some
                                            items (or all of it): the edge's item vectors
                                            fetch them (``edge.ranking.item_vectors``)
CatalogChange       catalog_change          origins only: the catalog changed (some items,
                                            or all of it); reload them
==================  ======================  ============================================

``CatalogChange`` goes to the origins' stream only (``for_edges`` is False): an edge that
does not know a type refuses it as malformed, and a refused entry breaks its stream's
chain, which the edge must treat as a gap (everything stale). The publisher refuses to
send it to a region.

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
import struct
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from enum import Enum
from typing import Any

import msgpack

from sync.exceptions import MalformedMessage

CODEC_VERSION = 1

# Stream entry fields.
SEQ_FIELD = b"s"
PREV_FIELD = b"p"
TIME_FIELD = b"t"
BODY_FIELD = b"m"


@dataclass(frozen=True, slots=True)
class UserUpdate:
    """The origin wrote a new model for the user (``version``: the user's state version,
    which only grows; ``model``: the model as ``relevance.user_model.model_bytes`` encodes
    it, so an edge can rank for the user without asking) or moved them to another
    activity segment. With the model, the user's stated preferences as they were read
    then (``protocol.user_state.encode_preferences``) and their version
    (``preferences_version``, which only grows): an edge that has both ranks the user
    without asking the origin anything."""

    user_id: str
    version: int
    segment: str | None = None
    model: bytes | None = None
    preferences: bytes | None = None
    preferences_version: int | None = None


@dataclass(frozen=True, slots=True)
class InvalidateUser:
    user_id: str
    reason: str  # what caused it (``purchase``, ``preference``...), for logs and metrics


@dataclass(frozen=True, slots=True)
class InvalidateSegment:
    segment: str


@dataclass(frozen=True, slots=True)
class InvalidateKey:
    key: str


@dataclass(frozen=True, slots=True)
class PurgeTag:
    """Every entry tagged ``tag`` at fill time; ``soft``: keep it for stale-if-error."""

    tag: str
    soft: bool


@dataclass(frozen=True, slots=True)
class ItemUpdate:
    """What changed about an item; None: unchanged. ``removed``: the item was deleted
    from the catalog; sent with ``in_stock=False`` so that an edge that predates the field
    still hard-purges the item's entries."""

    item_id: str
    in_stock: bool | None
    price: float | None
    removed: bool = False


@dataclass(frozen=True, slots=True)
class ModelEpoch:
    """A new deployment is live (``origin.catalog.deployment``): its epoch, model version
    and ranking policy (``protocol.policies.encode_policy``; None: the configured one).
    ``policy`` is optional on the wire, so an edge that predates it applies the epoch (its
    soft purge) and ignores the policy, and an origin that predates it sends none: a
    rolling deploy in either order stays safe."""

    epoch: int
    model_version: str
    policy: bytes | None = None


@dataclass(frozen=True, slots=True)
class ItemPosteriors:
    """The workers changed the posteriors of ``item_ids`` in context cell ``cell`` (``all``:
    over all contexts): ``rows`` holds each one's stored row as Redis holds it now, in
    ``item_ids``'s order, three little-endian float64 (alpha, beta, last change in ms;
    ``rows_of`` reads them). Sent after every worker batch that changed any, so that an
    edge ranks by what every impression and engagement taught within a moment, not by what
    its pool held when it was filled."""

    cell: str
    item_ids: tuple[str, ...]
    rows: bytes

    def rows_of(self) -> tuple[tuple[float, float, float], ...]:
        """The rows, checked: ``MalformedMessage`` for a size that does not match the ids,
        a non-finite or negative number."""
        width = 24
        if len(self.rows) != width * len(self.item_ids):
            raise MalformedMessage(
                f"item_posteriors: {len(self.rows)} bytes of rows for {len(self.item_ids)} items"
            )
        values = struct.unpack(f"<{3 * len(self.item_ids)}d", self.rows)
        if not all(math.isfinite(v) and v >= 0 for v in values):
            raise MalformedMessage("item_posteriors: a row holds a non-finite or negative number")
        return tuple(
            (values[3 * n], values[3 * n + 1], values[3 * n + 2]) for n in range(len(self.item_ids))
        )


@dataclass(frozen=True, slots=True)
class ItemsChanged:
    """The catalog ingested, updated or deleted ``item_ids`` (None: everything may have
    changed, a rebuild's promotion or a catalog origin that started), and is at catalog
    ``version`` after it: an edge holding item vectors fetches those items' vectors (all of
    them, for an ``everything``) from an origin whose catalog is at that version or later
    (``protocol.item_vectors``). The edges' counterpart of ``CatalogChange``."""

    version: int
    item_ids: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class CatalogChange:
    """The catalog changed on the origin ``origin`` (the process that wrote it, by its
    instance id: it skips its own): ``item_ids`` were ingested, updated or deleted, or,
    None, everything may have changed (a rebuild's promotion; a catalog origin that
    started). ``version`` and ``slot`` are the catalog's after the change
    (``catalog:version``, the live slot ``items`` names; None: no collection): an origin
    holding exactly these needs no reload for an ``everything``."""

    origin: str
    version: int
    slot: str | None = None
    item_ids: tuple[str, ...] | None = None


Message = (
    UserUpdate
    | InvalidateUser
    | InvalidateSegment
    | InvalidateKey
    | PurgeTag
    | ItemUpdate
    | ModelEpoch
    | ItemPosteriors
    | ItemsChanged
    | CatalogChange
)

# Messages for the origins' stream only (see the module's docstring).
ORIGINS_ONLY: tuple[type[Any], ...] = (CatalogChange,)


def for_edges(message: Message) -> bool:
    """Whether an edge may be sent ``message`` (every type it knows)."""
    return not isinstance(message, ORIGINS_ONLY)


@dataclass(frozen=True, slots=True)
class Envelope:
    seq: int  # origin sequence, >= 1, strictly increasing in every region stream
    published_at_ms: int  # the publisher's clock, milliseconds since the epoch
    message: Message


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
