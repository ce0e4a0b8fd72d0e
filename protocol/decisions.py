"""The decision log (the personalization results): every answer served, by an
origin or from an edge's cache, as one record on the user's partition of the
``decisions:{p}`` streams.

A record says who was shown what, where, and how likely the policy that chose it was to
put each item there, so that rewards can be joined to it (feedback carries the
``request_id``) and so that a policy's engagement can be estimated offline from it:

- ``request_id`` (the answer's), ``user_id`` (who saw it: for a segment-wide answer too),
  ``audience`` (``user``, or ``segment:<segment>`` for an answer shared by a segment);
- ``context`` (the context cell ``<device>_<daypart>`` the answer was ranked for), ``page``;
- ``at_ms``, ``served_by`` (``origin`` or ``edge:<region>``), ``policy`` and
  ``policy_version`` (the configuration that ranked it), ``model_version``;
- ``shown``: per position (1-based, in the order served) the item, its score and its
  propensity, P(this item at this position | the policy), in (0, 1];
- ``ranking_id`` (format 2): the request id of the origin's answer whose ranking this
  answer serves (an edge serves one ranking to many requests, each with its own id), ""
  when it is this decision's own. The context log (``protocol.contexts``) is keyed by it.

Wire format: a msgpack array led by the format version, strict on decode (a record of
another version or shape is refused, never misread). The schema is stable: fields are only
ever added under a new version, which readers of the old one refuse by name. Readers of
this one read format 1 too (it had no ``ranking_id``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgpack

from protocol.exceptions import MalformedMessage

FORMAT_VERSION = 2
_FORMAT_FIELDS = {1: 10, 2: 11}  # the fields of each format this reader reads
DECISION_FIELD = b"d"  # the stream entry's one field: a record, or a batch of records

# On an edge's fill: who will log the decision (``edge:<region>``), so the origin does not.
DECISION_BY_HEADER = "x-perso-decision-by"
# On the origin's answer, what an edge needs to log the decisions it serves from it: the
# context cell, ``<policy>/<version>``, and each item's propensity in the answer's order.
CONTEXT_HEADER = "x-perso-context"
POLICY_HEADER = "x-perso-policy"
PROPENSITIES_HEADER = "x-perso-propensities"


@dataclass(frozen=True, slots=True)
class Shown:
    item_id: str
    position: int  # 1-based
    score: float
    propensity: float  # (0, 1]


@dataclass(frozen=True, slots=True)
class Decision:
    request_id: str
    user_id: str
    audience: str
    context: str
    page: str
    at_ms: int
    served_by: str
    policy: str
    policy_version: str
    model_version: str
    shown: tuple[Shown, ...]
    ranking_id: str = ""  # "": this decision's own ranking

    @property
    def ranked_as(self) -> str:
        """The request id of the ranking this decision served."""
        return self.ranking_id or self.request_id


@dataclass(frozen=True, slots=True)
class EncodedDecision:
    """A record already in its wire form (``encode_fields``), with the user whose partition
    it goes to: what a hot path hands the decision log instead of a ``Decision``."""

    user_id: str
    payload: bytes


def encode_fields(
    *,
    request_id: str,
    user_id: str,
    audience: str,
    context: str,
    page: str,
    at_ms: int,
    served_by: str,
    policy: str,
    policy_version: str,
    model_version: str,
    shown: list[list[Any]],
    ranking_id: str = "",
) -> bytes:
    """The wire form of a record from its fields; ``shown``: per position ``[item_id,
    position, score, propensity]``. The one place the layout is written."""
    payload = [
        FORMAT_VERSION,
        request_id,
        user_id,
        audience,
        context,
        page,
        at_ms,
        served_by,
        [policy, policy_version, model_version],
        shown,
        ranking_id,
    ]
    packed: bytes = msgpack.packb(payload, use_bin_type=True)
    return packed


def encode_decision(d: Decision) -> bytes:
    return encode_fields(
        request_id=d.request_id,
        user_id=d.user_id,
        audience=d.audience,
        context=d.context,
        page=d.page,
        at_ms=d.at_ms,
        served_by=d.served_by,
        policy=d.policy,
        policy_version=d.policy_version,
        model_version=d.model_version,
        shown=[[s.item_id, s.position, float(s.score), float(s.propensity)] for s in d.shown],
        ranking_id=d.ranking_id,
    )


def decode_decision(raw: bytes) -> Decision:
    """The decision ``encode_decision`` wrote; ``MalformedMessage`` for anything else."""
    return _decision(_unpacked(raw))


def _unpacked(raw: bytes) -> Any:
    try:
        return msgpack.unpackb(raw, raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise MalformedMessage(f"not a decision: {exc}") from exc


def _decision(payload: Any) -> Decision:
    """The decision of an unpacked record."""
    if not isinstance(payload, list) or not payload:
        raise MalformedMessage("not a decision record")
    version = payload[0]
    if type(version) is not int or version not in _FORMAT_FIELDS:
        raise MalformedMessage(f"decision format {version!r}, expected 1 or {FORMAT_VERSION}")
    if len(payload) != _FORMAT_FIELDS[version]:
        raise MalformedMessage(
            f"a format {version} decision record has {_FORMAT_FIELDS[version]} fields, "
            f"not {len(payload)}"
        )
    _, rid, user, audience, context, page, at_ms, served_by, policy, shown = payload[:10]
    ranking_id = _str(payload[10], "ranking_id") if version >= 2 else ""
    names = _strings(policy, 3, "policy")
    return Decision(
        request_id=_str(rid, "request_id"),
        user_id=_str(user, "user_id"),
        audience=_str(audience, "audience"),
        context=_str(context, "context"),
        page=_str(page, "page"),
        at_ms=_int(at_ms, "at_ms"),
        served_by=_str(served_by, "served_by"),
        policy=names[0],
        policy_version=names[1],
        model_version=names[2],
        shown=tuple(_shown(s) for s in _list(shown, "shown")),
        ranking_id=ranking_id,
    )


def encode_batch(encoded: Iterable[bytes]) -> bytes:
    """One stream entry for several records (each ``encode_decision``'s bytes): a msgpack
    array of them as binary strings. Writers batch what one flush sends to a partition, so
    the decision log costs one ``XADD`` per partition and flush, not one per answer."""
    packed: bytes = msgpack.packb(list(encoded), use_bin_type=True)
    return packed


def decode_entry(raw: bytes) -> list[Decision]:
    """The decisions of one stream entry: a single record, or a batch (``encode_batch``);
    ``MalformedMessage`` when any of it is not a decision."""
    payload = _unpacked(raw)
    if isinstance(payload, list) and payload and isinstance(payload[0], bytes):
        return [decode_decision(record) for record in payload]
    return [_decision(payload)]


def propensities_header(propensities: Iterable[float]) -> str:
    """``PROPENSITIES_HEADER``'s value: comma-separated, four significant digits."""
    return ",".join(f"{p:.4g}" for p in propensities)


def parse_propensities(value: str | None, count: int) -> tuple[float, ...]:
    """The ``count`` propensities of ``PROPENSITIES_HEADER``; 1.0 each (a deterministic
    answer) when the header is missing or does not fit."""
    if value:
        try:
            parsed = tuple(float(p) for p in value.split(","))
        except ValueError:
            parsed = ()
        if len(parsed) == count and all(0.0 < p <= 1.0 for p in parsed):
            return parsed
    return (1.0,) * count


def _shown(raw: Any) -> Shown:
    fields = _list(raw, "shown item")
    if len(fields) != 4:
        raise MalformedMessage(f"a shown item has {len(fields)} fields, expected 4")
    item, position, score, propensity = fields
    p = _float(propensity, "propensity")
    if not 0.0 < p <= 1.0:
        raise MalformedMessage(f"propensity {p} outside (0, 1]")
    return Shown(_str(item, "item_id"), _int(position, "position"), _float(score, "score"), p)


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise MalformedMessage(f"{what} is {type(value).__name__}, expected a list")
    return value


def _strings(value: Any, n: int, what: str) -> list[str]:
    items = _list(value, what)
    if len(items) != n:
        raise MalformedMessage(f"{what} has {len(items)} fields, expected {n}")
    return [_str(v, what) for v in items]


def _str(value: Any, what: str) -> str:
    if type(value) is not str:
        raise MalformedMessage(f"{what} is {type(value).__name__}, expected str")
    return value


def _int(value: Any, what: str) -> int:
    if type(value) is not int:
        raise MalformedMessage(f"{what} is {type(value).__name__}, expected int")
    return value


def _float(value: Any, what: str) -> float:
    if type(value) is not float or not math.isfinite(value):
        raise MalformedMessage(f"{what} is {value!r}, expected a finite float")
    return value
