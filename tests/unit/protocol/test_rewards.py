from __future__ import annotations

from typing import Any

import msgpack
import pytest

from protocol.exceptions import MalformedMessage
from protocol.rewards import Rewarded, decode_reward, encode_reward


@pytest.mark.parametrize(
    "record",
    [
        Rewarded("r-1", "u-1", 1_767_225_600_000, {"it-3": 0.25, "it-9": 1.0}, ("it-4",)),
        Rewarded("r-2", "u-2", 0),  # nothing engaged, nothing dismissed: all left alone
    ],
)
def test_round_trip(record: Rewarded) -> None:
    assert decode_reward(encode_reward(record)) == record


GOOD: dict[str, Any] = {
    "v": 1,
    "request_id": "r-1",
    "user_id": "u-1",
    "closed_ms": 5,
    "engaged": {"it-1": 0.5},
    "dismissed": ["it-2"],
}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"v": 2}, "version"),
        ({"request_id": ""}, "request_id"),
        ({"user_id": 7}, "user_id"),
        ({"closed_ms": -1}, "closed_ms"),
        ({"closed_ms": True}, "closed_ms"),
        ({"engaged": []}, "engaged"),
        ({"engaged": {"it-1": 0.0}}, "engaged"),
        ({"engaged": {"it-1": 1.5}}, "engaged"),
        ({"engaged": {"it-1": float("nan")}}, "engaged"),
        ({"dismissed": ["", "x"]}, "dismissed"),
        ({"dismissed": "it-2"}, "dismissed"),
    ],
)
def test_a_malformed_record_names_its_field(change: dict[str, Any], field: str) -> None:
    raw = msgpack.packb({**GOOD, **change}, use_bin_type=True)
    with pytest.raises(MalformedMessage, match=field):
        decode_reward(raw)


def test_not_msgpack() -> None:
    with pytest.raises(MalformedMessage, match="not msgpack"):
        decode_reward(b"\xc1")
