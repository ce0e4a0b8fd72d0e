from __future__ import annotations

import msgpack
import pytest

from protocol.events import FeedbackEvent, decode_event, derive_interaction_id, encode_event
from protocol.exceptions import MalformedMessage

FULL = FeedbackEvent(
    interaction_id="ix-1",
    user_id="u-1",
    item_id="it-000001",
    action="click",
    timestamp_ms=1_767_225_600_000,
    accepted_ms=1_767_225_601_000,
    session_id="s-1",
    request_id="r-1",
    position=3,
    duration_ms=5000,
    reward_override=0.8,
)
MINIMAL = FeedbackEvent("ix-2", "u-2", "it-2", "view", 1, 2)


@pytest.mark.parametrize("event", [FULL, MINIMAL])
def test_round_trip(event: FeedbackEvent) -> None:
    assert decode_event(encode_event(event)) == event


def test_encoding_is_compact() -> None:
    assert len(encode_event(MINIMAL)) < 60


def _packed(**doc: object) -> bytes:
    return msgpack.packb(doc)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"\xc1", "not msgpack"),
        (msgpack.packb([1, 2]), "expected a map"),
        (_packed(v=2, i="x"), "codec version"),
        (_packed(v=1, i="x", u="u", it="i", a="view", t=1), "'at'"),
        (_packed(v=1, i="x", u="u", it="i", a="view", t="1", at=1), "'t'"),
        (_packed(v=1, i="x", u="u", it="i", a="view", t=1, at=1, p="3"), "'p'"),
        (_packed(v=1, i=5, u="u", it="i", a="view", t=1, at=1), "'i'"),
    ],
)
def test_malformed_entries_are_rejected(raw: bytes, message: str) -> None:
    with pytest.raises(MalformedMessage, match=message):
        decode_event(raw)


def test_integer_reward_is_accepted_as_float() -> None:
    raw = _packed(v=1, i="x", u="u", it="i", a="view", t=1, at=1, rw=1)
    assert decode_event(raw).reward_override == 1.0


def test_derived_interaction_id_is_stable_and_distinguishes_interactions() -> None:
    base = {"session_id": "s", "request_id": "r", "timestamp_ms": 10}
    first = derive_interaction_id("u", "it", "click", **base)
    assert first == derive_interaction_id("u", "it", "click", **base)
    assert first.startswith("ix-")
    others = {
        derive_interaction_id("u2", "it", "click", **base),
        derive_interaction_id("u", "it2", "click", **base),
        derive_interaction_id("u", "it", "view", **base),
        derive_interaction_id("u", "it", "click", **{**base, "timestamp_ms": 11}),
        derive_interaction_id("u", "it", "click", **{**base, "request_id": None}),
    }
    assert first not in others
    assert len(others) == 5
