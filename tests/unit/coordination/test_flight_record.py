"""The single-flight record codec, the follower's poll delay and the config's checks."""

from __future__ import annotations

import math

import pytest

from coordination.flight_record import (
    FlightRecord,
    JsonValue,
    decode_record,
    done,
    encode_record,
    in_progress,
    timed_out,
    to_json_value,
)
from coordination.single_flight import IdempotencyConfig, poll_delay
from protocol.exceptions import MalformedMessage

RUN = in_progress("tok", 1_000, 500)


@pytest.mark.parametrize(
    ("record", "encoded"),
    [
        (RUN, '{"status":"in_progress","owner":"tok","started_ms":1000,"deadline_ms":1500}'),
        (
            done(RUN, 1_200, {"n": [1, 2.5, None]}),
            '{"status":"done","owner":"tok","started_ms":1000,"deadline_ms":1500,'
            '"finished_ms":1200,"result":{"n":[1,2.5,null]}}',
        ),
        (
            done(RUN, 1_200, None),
            '{"status":"done","owner":"tok","started_ms":1000,"deadline_ms":1500,'
            '"finished_ms":1200,"result":null}',
        ),
        (
            timed_out(RUN, 1_700),
            '{"status":"timeout","owner":"tok","started_ms":1000,"deadline_ms":1500,'
            '"error":"lease lapsed 200 ms before the run finished"}',
        ),
    ],
)
def test_codec_round_trip(record: FlightRecord, encoded: str) -> None:
    assert encode_record(record) == encoded
    assert decode_record(encoded) == record
    assert decode_record(encoded.encode()) == record


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[1, 2]",
        b'{"status":"maybe","owner":"t","started_ms":1,"deadline_ms":2}',
        b'{"status":"in_progress","started_ms":1,"deadline_ms":2}',
        b'{"status":"in_progress","owner":"t","started_ms":1.5,"deadline_ms":2}',
        b'{"status":"in_progress","owner":"t","started_ms":true,"deadline_ms":2}',
        b'{"status":"timeout","owner":"t","started_ms":1,"deadline_ms":2,"error":3}',
        b'{"status":"done","owner":"t","started_ms":1,"deadline_ms":2}',
    ],
)
def test_what_is_not_a_record_is_refused(raw: bytes) -> None:
    with pytest.raises(MalformedMessage):
        decode_record(raw)


@pytest.mark.parametrize(
    ("status", "now_ms", "lapsed"),
    [
        ("in_progress", 1_499, False),
        ("in_progress", 1_500, True),
        ("done", 9_999, False),
        ("timeout", 9_999, False),
    ],
)
def test_only_an_unfinished_run_lapses(status: str, now_ms: int, lapsed: bool) -> None:
    record = decode_record(
        f'{{"status":"{status}","owner":"t","started_ms":1000,"deadline_ms":1500,"result":1}}'
    )
    assert record.lapsed(now_ms) is lapsed


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"a": (1, 2)}, {"a": [1, 2]}),
        ({1: "x"}, {"1": "x"}),
        ("é", "é"),
        (None, None),
    ],
)
def test_results_are_what_a_json_round_trip_gives(value: object, expected: JsonValue) -> None:
    assert to_json_value(value) == expected


@pytest.mark.parametrize("value", [{1, 2}, b"bytes", object(), math.nan, [math.inf]])
def test_results_without_a_json_form_are_a_type_error(value: object) -> None:
    with pytest.raises(TypeError):
        to_json_value(value)


@pytest.mark.parametrize(
    ("polls", "u", "expected"),
    [
        (0, 0.0, 0.025),  # the upper half of the first cap
        (0, 0.5, 0.0375),
        (1, 0.0, 0.05),
        (3, 0.0, 0.2),
        (5, 0.0, 0.5),  # capped at max_s
        (5, 0.999, 0.9995),
        (10_000, 0.0, 0.5),  # no overflow however long the wait
    ],
)
def test_poll_delay_doubles_up_to_its_cap(polls: int, u: float, expected: float) -> None:
    assert poll_delay(polls, 0.05, 1.0, u) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"scope": ""}, "scope"),
        ({"scope": "a:b"}, "scope"),
        ({"scope": "s", "ttl_ms": 0}, "positive"),
        ({"scope": "s", "in_progress_ttl_ms": -1}, "positive"),
        ({"scope": "s", "wait_timeout_ms": 0}, "positive"),
        ({"scope": "s", "poll_min_ms": 0}, "poll"),
        ({"scope": "s", "poll_min_ms": 20, "poll_max_ms": 10}, "poll"),
    ],
)
def test_config_refuses_nonsense(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        IdempotencyConfig(**fields)  # type: ignore[arg-type]
