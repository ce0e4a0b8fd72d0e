from __future__ import annotations

import math
from typing import Any

import msgpack
import pytest

from protocol.exceptions import MalformedMessage
from protocol.user_model_wire import UserModelWire, decode_user_model, encode_user_model

STATES = [
    UserModelWire("u-1", 0, None, {}),
    UserModelWire("u-1", 7, b"\x01" * 16, {"books": -1.0, "toys": 0.25}),
    UserModelWire("ü-日本", 2**40, b"\x00\x3c" * 8, {"Home & Garden": 1.0}),
]


@pytest.mark.parametrize("state", STATES)
def test_states_round_trip(state: UserModelWire) -> None:
    assert decode_user_model(encode_user_model(state)) == state


def doc(**changes: Any) -> bytes:
    d: dict[str, Any] = msgpack.unpackb(encode_user_model(STATES[1]), raw=False)
    for name, value in changes.items():
        if value is ...:
            del d[name]
        else:
            d[name] = value
    return msgpack.packb(d, use_bin_type=True)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"\xc1", "not msgpack"),
        (msgpack.packb([]), "not a map"),
        (doc(v=2), "unknown version 2"),
        (doc(user_id=""), "'user_id' is not a non-empty string"),
        (doc(user_id=...), "'user_id' is not a non-empty string"),
        (doc(version=-1), "'version' is not a count"),
        (doc(version=True), "'version' is not a count"),
        (doc(model=""), "'model' is not bytes"),
        (doc(model=b""), "'model' is not bytes"),
        (doc(preferences=[]), "'preferences' is not a map"),
        (doc(preferences={"books": 1.5}), "'preferences' holds 'books': 1.5"),
        (doc(preferences={"books": math.nan}), "'preferences' holds 'books': nan"),
        (doc(preferences={"": 0.5}), "'preferences' holds '': 0.5"),
        (doc(preferences={"books": True}), "'preferences' holds 'books': True"),
    ],
)
def test_damaged_states_are_refused_naming_the_field(raw: bytes, problem: str) -> None:
    with pytest.raises(MalformedMessage, match=problem):
        decode_user_model(raw)
