from __future__ import annotations

import math
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.decisions import (
    FORMAT_VERSION,
    Decision,
    Shown,
    decode_decision,
    decode_entry,
    encode_batch,
    encode_decision,
    parse_propensities,
    propensities_header,
)
from protocol.exceptions import MalformedMessage


def decision(shown: tuple[Shown, ...] = (), **fields: Any) -> Decision:
    base: dict[str, Any] = {
        "request_id": "req-1",
        "user_id": "u-42",
        "audience": "user",
        "context": "mobile_evening",
        "page": "home",
        "at_ms": 1_767_225_600_000,
        "served_by": "origin",
        "policy": "thompson",
        "policy_version": "3",
        "model_version": "m-7",
    }
    base.update(fields)
    return Decision(shown=shown, **base)


SHOWN = (
    Shown("sku-1", 1, 1.25, 0.75),
    Shown("sku-2", 2, -0.5, 1.0),
    Shown("sku-3", 3, 0.0, 1 / 64),
)


@pytest.mark.parametrize(
    "d",
    [
        decision(),
        decision(SHOWN),
        decision(SHOWN[:1], audience="segment:mobile_evening_fr", served_by="edge:eu-west"),
        decision(SHOWN, user_id="ünïcødé-用户", page="", at_ms=0),
        decision((Shown("x", 1, -1e300, 5e-324),), at_ms=2**63 - 1),
    ],
    ids=["nothing-shown", "three-shown", "segment-from-an-edge", "unicode-and-empty", "extremes"],
)
def test_decisions_round_trip(d: Decision) -> None:
    assert decode_decision(encode_decision(d)) == d


def test_the_record_is_a_msgpack_array_led_by_its_version() -> None:
    payload = msgpack.unpackb(encode_decision(decision(SHOWN)), raw=False)
    assert isinstance(payload, list)
    assert len(payload) == 11
    assert payload[0] == FORMAT_VERSION == 2
    assert payload[8] == ["thompson", "3", "m-7"]
    assert payload[9][0] == ["sku-1", 1, 1.25, 0.75]


def test_integral_scores_are_written_as_floats() -> None:
    d = decision((Shown("a", 1, 2, 1),))
    back = decode_decision(encode_decision(d))
    assert back.shown[0].score == 2.0
    assert type(back.shown[0].score) is float
    assert type(back.shown[0].propensity) is float


def valid_payload() -> list[Any]:
    return [
        FORMAT_VERSION,
        "req-1",
        "u-42",
        "user",
        "mobile_evening",
        "home",
        1000,
        "origin",
        ["thompson", "3", "m-7"],
        [["sku-1", 1, 1.25, 0.75]],
        "req-0",
    ]


def with_field(index: int, value: Any) -> bytes:
    payload = valid_payload()
    payload[index] = value
    return bytes(msgpack.packb(payload, use_bin_type=True))


def with_shown(fields: list[Any]) -> bytes:
    return with_field(9, [fields])


def test_the_valid_payload_of_these_tests_decodes() -> None:
    decoded = decode_decision(bytes(msgpack.packb(valid_payload())))
    assert decoded.shown[0].item_id == "sku-1"
    assert decoded.ranked_as == "req-0"


def test_a_format_1_record_still_decodes_as_its_own_ranking() -> None:
    old = [1, *valid_payload()[1:10]]
    decoded = decode_decision(bytes(msgpack.packb(old)))
    assert (decoded.ranking_id, decoded.ranked_as) == ("", "req-1")


ENCODED = encode_decision(decision(SHOWN))


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\xc1",  # a byte msgpack never uses
        ENCODED[:-5],  # truncated
        ENCODED + b"\x00",  # trailing data
        msgpack.packb({"version": 1}),
        msgpack.packb("a string"),
        msgpack.packb(valid_payload()[:9]),
        msgpack.packb(valid_payload()[:10]),  # format 2 without its ranking id
        with_field(10, 7),
        with_field(10, None),
        msgpack.packb([*valid_payload(), "extra"]),
        with_field(0, 3),  # a newer format
        with_field(0, 0),
        with_field(0, True),  # equal to 1 in Python, not a version
        with_field(0, "1"),
        with_field(0, 1.0),
        with_field(1, 17),
        with_field(2, None),
        with_field(3, b"user"),  # bytes, not str
        with_field(6, 1000.0),
        with_field(6, "1000"),
        with_field(6, True),
        with_field(7, ["origin"]),
        with_field(8, ["thompson", "3"]),
        with_field(8, ["thompson", "3", "m-7", "x"]),
        with_field(8, ["thompson", 3, "m-7"]),
        with_field(8, "thompson/3"),
        with_field(9, {"sku-1": 1}),
        with_field(9, ["sku-1"]),
        with_shown(["sku-1", 1, 1.25]),
        with_shown(["sku-1", 1, 1.25, 0.75, "x"]),
        with_shown([1, 1, 1.25, 0.75]),
        with_shown(["sku-1", "1", 1.25, 0.75]),
        with_shown(["sku-1", 1.0, 1.25, 0.75]),
        with_shown(["sku-1", 1, 1, 0.75]),  # an integral score is not a float on the wire
        with_shown(["sku-1", 1, math.nan, 0.75]),
        with_shown(["sku-1", 1, math.inf, 0.75]),
        with_shown(["sku-1", 1, 1.25, 0.0]),
        with_shown(["sku-1", 1, 1.25, -0.5]),
        with_shown(["sku-1", 1, 1.25, 1.0000001]),
        with_shown(["sku-1", 1, 1.25, math.nan]),
        with_shown(["sku-1", 1, 1.25, None]),
    ],
)
def test_anything_else_is_malformed(raw: bytes) -> None:
    with pytest.raises(MalformedMessage):
        decode_decision(raw)


def test_a_record_of_another_version_is_refused_by_name() -> None:
    with pytest.raises(MalformedMessage, match="decision format 3, expected 1 or 2"):
        decode_decision(with_field(0, 3))


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_are_malformed(raw: bytes) -> None:
    try:
        d = decode_decision(raw)
    except MalformedMessage:
        return
    assert isinstance(d, Decision)


_text = st.text(max_size=20)
_shown = st.builds(
    Shown,
    item_id=_text,
    position=st.integers(min_value=1, max_value=1000),
    score=st.floats(allow_nan=False, allow_infinity=False),
    propensity=st.floats(min_value=0.0, max_value=1.0, exclude_min=True),
)
_decisions = st.builds(
    Decision,
    request_id=_text,
    user_id=_text,
    audience=_text,
    context=_text,
    page=_text,
    at_ms=st.integers(min_value=-(2**63), max_value=2**64 - 1),
    served_by=_text,
    policy=_text,
    policy_version=_text,
    model_version=_text,
    shown=st.lists(_shown, max_size=8).map(tuple),
)


@settings(max_examples=300, deadline=None)
@given(_decisions)
def test_any_decision_round_trips(d: Decision) -> None:
    assert decode_decision(encode_decision(d)) == d


@pytest.mark.parametrize(
    ("propensities", "header"),
    [
        ([], ""),
        ([1.0], "1"),
        ([0.5, 0.25, 1.0], "0.5,0.25,1"),
        ([1 / 64], "0.01562"),
        ([2 / 3], "0.6667"),
        ([0.000123456], "0.0001235"),
        ([1e-7], "1e-07"),
    ],
    ids=["none", "one", "several", "one-of-64", "four-digits", "small", "tiny"],
)
def test_propensities_header(propensities: list[float], header: str) -> None:
    assert propensities_header(propensities) == header
    assert propensities_header(iter(propensities)) == header


@pytest.mark.parametrize(
    ("value", "count", "expected"),
    [
        ("0.5,0.25,1", 3, (0.5, 0.25, 1.0)),
        ("1", 1, (1.0,)),
        (" 0.5, 0.25", 2, (0.5, 0.25)),  # float() forgives spaces
        ("", 0, ()),
        (None, 0, ()),
        # everything else: a deterministic answer, 1.0 each
        (None, 3, (1.0, 1.0, 1.0)),
        ("", 2, (1.0, 1.0)),
        ("0.5,0.25", 3, (1.0, 1.0, 1.0)),  # too few
        ("0.5,0.25,1,1", 3, (1.0, 1.0, 1.0)),  # too many
        ("0.5,abc", 2, (1.0, 1.0)),
        ("0.5,,0.25", 3, (1.0, 1.0, 1.0)),
        ("0.5,0", 2, (1.0, 1.0)),  # zero is no propensity of a shown item
        ("0.5,-0.1", 2, (1.0, 1.0)),
        ("0.5,1.5", 2, (1.0, 1.0)),
        ("nan,0.5", 2, (1.0, 1.0)),
        ("inf", 1, (1.0,)),
        ("0.5;0.25", 2, (1.0, 1.0)),
    ],
    ids=[
        "three",
        "one",
        "spaces",
        "empty-for-none",
        "missing-for-none",
        "missing",
        "empty",
        "too-few",
        "too-many",
        "not-a-number",
        "empty-element",
        "zero",
        "negative",
        "above-one",
        "nan",
        "inf",
        "wrong-separator",
    ],
)
def test_parse_propensities(value: str | None, count: int, expected: tuple[float, ...]) -> None:
    assert parse_propensities(value, count) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.floats(min_value=0.0, max_value=1.0, exclude_min=True, allow_subnormal=False),
        max_size=30,
    )
)
def test_the_header_carries_propensities_to_four_digits(propensities: list[float]) -> None:
    back = parse_propensities(propensities_header(propensities), len(propensities))
    assert len(back) == len(propensities)
    for p, q in zip(propensities, back, strict=True):
        assert 0.0 < q <= 1.0
        assert q == pytest.approx(p, rel=5e-4)


def test_a_batch_entry_holds_its_records_in_order() -> None:
    records = [
        Decision(
            request_id=f"r-{n}",
            user_id="u",
            audience="user",
            context="mobile_evening",
            page="home",
            at_ms=n,
            served_by="origin",
            policy="thompson",
            policy_version="1",
            model_version="m",
            shown=(Shown("it-1", 1, 0.5, 0.25),),
        )
        for n in range(3)
    ]
    batch = encode_batch(encode_decision(d) for d in records)
    assert decode_entry(batch) == records
    assert decode_entry(encode_decision(records[0])) == records[:1]  # a lone record


@pytest.mark.parametrize("raw", [b"\xc1", msgpack.packb([b"not a record"]), b""])
def test_a_batch_with_anything_but_records_is_refused(raw: bytes) -> None:
    with pytest.raises(MalformedMessage):
        decode_entry(raw)
