"""The JSON record of one single-flight operation (``coordination.single_flight``) and its codec.

One record per key, in one of the single-flight states::

    in_progress  {"status", "owner", "started_ms", "deadline_ms"}
    done         ... + "finished_ms", "result"
    timeout      ... + "error"                 the owner's lease lapsed before it finished

``owner`` is the random token of the run that wrote the record: every change compares it,
so a run that lost its record cannot touch the next one's. Times are milliseconds on the
callers' clock. Pure functions, tested with tables.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, TypeAlias, cast, get_args

from protocol.exceptions import MalformedMessage

# What ``json.loads`` returns.
JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
Status = Literal["in_progress", "done", "timeout"]
STATUSES: tuple[Status, ...] = get_args(Status)


@dataclass(frozen=True, slots=True)
class FlightRecord:
    """One single-flight key's record: its ``status``, the ``owner`` token every
    compare-and-set checks, times in ms on the callers' clock, and the ``result`` (``done``
    only) or ``error`` (``timeout`` only)."""

    status: Status
    owner: str
    started_ms: int
    deadline_ms: int  # end of the owner's lease: after it, anyone may take over
    finished_ms: int | None = None
    result: JsonValue = None  # the worker's value, decoded; only a done record has one
    error: str | None = None

    def lapsed(self, now_ms: int) -> bool:
        """Whether this is an unfinished run whose lease is over."""
        return self.status == "in_progress" and now_ms >= self.deadline_ms


def in_progress(owner: str, now_ms: int, lease_ms: int) -> FlightRecord:
    """The record a leader writes as it starts: owned by ``owner``, its lease ending
    ``lease_ms`` after ``now_ms``."""
    return FlightRecord("in_progress", owner, now_ms, now_ms + lease_ms)


def done(run: FlightRecord, now_ms: int, result: JsonValue) -> FlightRecord:
    """``run`` finished at ``now_ms`` with ``result`` (already JSON-shaped: ``to_json_value``);
    ``run``'s owner and times stay, so the record still names the run that produced it."""
    return FlightRecord(
        "done", run.owner, run.started_ms, run.deadline_ms, finished_ms=now_ms, result=result
    )


def timed_out(run: FlightRecord, now_ms: int) -> FlightRecord:
    """``run`` marked ``timeout`` by a caller that found its lease over at ``now_ms``: the
    owner stays (a take-over compares it) and ``error`` says how long ago the lease lapsed."""
    late_ms = now_ms - run.deadline_ms
    return FlightRecord(
        "timeout",
        run.owner,
        run.started_ms,
        run.deadline_ms,
        error=f"lease lapsed {late_ms} ms before the run finished",
    )


def to_json_value(value: object) -> JsonValue:
    """``value`` as every caller will see it after a JSON round trip (tuples become lists);
    ``TypeError`` if it has no JSON form, NaN and infinities included (JSON has none)."""
    try:
        text = json.dumps(value, allow_nan=False)
    except ValueError as exc:
        raise TypeError(f"result is not JSON-serialisable: {exc}") from exc
    return cast(JsonValue, json.loads(text))


def encode_record(record: FlightRecord) -> str:
    """The record's compact JSON as stored: optional fields only when set, ``result`` only
    for ``done``; a result with NaN or an infinity raises ``ValueError`` (JSON has none)."""
    doc: dict[str, JsonValue] = {
        "status": record.status,
        "owner": record.owner,
        "started_ms": record.started_ms,
        "deadline_ms": record.deadline_ms,
    }
    if record.finished_ms is not None:
        doc["finished_ms"] = record.finished_ms
    if record.status == "done":
        doc["result"] = record.result
    if record.error is not None:
        doc["error"] = record.error
    return json.dumps(doc, allow_nan=False, separators=(",", ":"))


def decode_record(raw: bytes | str) -> FlightRecord:
    """The record in ``raw``; ``MalformedMessage`` if it is not one."""
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise MalformedMessage(f"single-flight record is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise MalformedMessage("single-flight record is not a JSON object")
    status, owner = doc.get("status"), doc.get("owner")
    started, deadline = doc.get("started_ms"), doc.get("deadline_ms")
    finished, error = doc.get("finished_ms"), doc.get("error")
    if status not in STATUSES or not isinstance(owner, str):
        raise MalformedMessage(f"single-flight record with status {status!r}, owner {owner!r}")
    if not (_is_ms(started) and _is_ms(deadline) and (finished is None or _is_ms(finished))):
        raise MalformedMessage("single-flight record with a time that is not integer ms")
    if error is not None and not isinstance(error, str):
        raise MalformedMessage("single-flight record whose error is not a string")
    if status == "done" and "result" not in doc:
        raise MalformedMessage("done single-flight record without a result")
    return FlightRecord(
        cast(Status, status),
        owner,
        cast(int, started),
        cast(int, deadline),
        finished_ms=cast("int | None", finished),
        result=cast(JsonValue, doc.get("result")),
        error=error,
    )


def _is_ms(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
