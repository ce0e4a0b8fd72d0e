from __future__ import annotations

import msgpack
import pytest

from origin.ranking.history import (
    DAY_MS,
    Interaction,
    RankingHistory,
    RequestContext,
    decode_context,
    decode_history,
    decode_interaction,
    encode_interaction,
)
from protocol.api import Device, PageType
from protocol.exceptions import MalformedMessage
from protocol.segments import Segment

NOW = 1_700_000_000_000
IDLE_MS = 30 * 60_000


@pytest.mark.parametrize(
    "interaction",
    [
        Interaction("ix-1", "it-1", "click", NOW),
        Interaction("ix-2", "it-2", "view", NOW, category="books", duration_ms=12_000, position=3),
        Interaction("ix-3", "it-3", "purchase", 0, position=0),
        Interaction("ïx-4", "it-ü", "dismiss", NOW, category="", duration_ms=0),
    ],
    ids=["minimal", "every-field", "zero-values", "unicode-and-empty"],
)
def test_interaction_round_trip(interaction: Interaction) -> None:
    raw = encode_interaction(interaction)
    assert decode_interaction(raw) == interaction
    # a pure function of the interaction: recording a retry again is a no-op in the zset
    assert encode_interaction(interaction) == raw
    same = Interaction(**{f: getattr(interaction, f) for f in Interaction.__slots__})
    assert encode_interaction(same) == raw


def test_different_interactions_encode_differently() -> None:
    a = Interaction("ix-1", "it-1", "click", NOW)
    b = Interaction("ix-1", "it-1", "click", NOW + 1)
    assert encode_interaction(a) != encode_interaction(b)


def pack(doc: object) -> bytes:
    packed: bytes = msgpack.packb(doc, use_bin_type=True)
    return packed


VALID = {"i": "ix", "it": "it-1", "a": "click", "t": NOW}


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\xc1",
        b"\x85",
        b"\x01\x02",
        pack([1, 2, 3]),
        pack("text"),
        pack(None),
        pack({k: v for k, v in VALID.items() if k != "t"}),
        pack({k: v for k, v in VALID.items() if k != "it"}),
        pack({**VALID, "t": "yesterday"}),
        pack({**VALID, "t": None}),
        pack({**VALID, "t": [1]}),
        b"\x81\xa1i\xc4\x01\xff",  # {"i": b"\xff"}: nothing else
        # optional fields of the wrong type would break the emotion signals later
        pack({**VALID, "d": "long"}),
        pack({**VALID, "d": 1.5}),
        pack({**VALID, "p": "top"}),
        pack({**VALID, "c": 7}),
        pack({**VALID, "d": True}),
    ],
    ids=[
        "empty",
        "reserved-byte",
        "truncated-map",
        "extra-data",
        "array",
        "string",
        "nil",
        "no-timestamp",
        "no-item",
        "timestamp-text",
        "timestamp-nil",
        "timestamp-array",
        "only-one-field",
        "duration-text",
        "duration-float",
        "position-text",
        "category-number",
        "duration-bool",
    ],
)
def test_malformed_interactions(raw: bytes) -> None:
    with pytest.raises(MalformedMessage):
        decode_interaction(raw)


def test_invalid_utf8_text_is_malformed() -> None:
    raw = b"\x84\xa1i\xa2\xff\xfe\xa2it\xa1x\xa1a\xa1v\xa1t\x01"
    with pytest.raises(MalformedMessage):
        decode_interaction(raw)


def test_decode_state_skips_damaged_and_sorts_newest_first() -> None:
    old = Interaction("a", "it-1", "view", NOW - 5_000)
    new = Interaction("b", "it-2", "click", NOW)
    state = decode_history(
        {b"dev": b"mobile"}, [encode_interaction(old), b"\xc1", encode_interaction(new)]
    )
    assert state.interactions == (new, old)
    assert state.context.device is Device.MOBILE


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, RequestContext()),
        (
            {b"dev": b"tablet", b"tz": b"-330", b"pg": b"search", b"ls": b"1700000000000"},
            RequestContext(Device.TABLET, -330, PageType.SEARCH, 1_700_000_000_000),
        ),
        ({b"dev": b"toaster", b"pg": b"checkout"}, RequestContext()),
        ({b"tz": b"1.5", b"ls": b"soon"}, RequestContext()),
        ({b"tz": b"", b"ls": b"\xff"}, RequestContext()),
        ({b"dev": b"MOBILE"}, RequestContext()),
        ({b"dev": b"\xff\xfe", b"pg": b"\xc3"}, RequestContext()),  # not UTF-8
        ({b"dev": b"tv", b"junk": b"\x00"}, RequestContext(device=Device.TV)),
    ],
    ids=[
        "empty",
        "complete",
        "unknown-enums",
        "bad-numbers",
        "empty-and-binary-numbers",
        "wrong-case",
        "invalid-utf8",
        "unknown-field",
    ],
)
def test_decode_context_is_tolerant(fields: dict[bytes, bytes], expected: RequestContext) -> None:
    assert decode_context(fields) == expected


def ix(age_ms: int, n: int = 0) -> Interaction:
    return Interaction(f"ix-{n}-{age_ms}", f"it-{n}", "view", NOW - age_ms)


@pytest.mark.parametrize(
    ("ages_ms", "segment"),
    [
        ((), Segment.NEW),
        ((2 * DAY_MS,), Segment.CASUAL),  # seen before, nothing today
        ((1_000,), Segment.CASUAL),
        ((1_000, 2_000), Segment.CASUAL),
        ((1_000, 2_000, DAY_MS), Segment.ACTIVE),  # the 24 h edge counts
        ((1_000, 2_000, DAY_MS + 1), Segment.CASUAL),
        (tuple(range(10)), Segment.ACTIVE),
        (tuple(range(11)), Segment.POWER),
    ],
    ids=["never", "seen-before", "one", "two", "three-at-edge", "third-too-old", "ten", "eleven"],
)
def test_segment(ages_ms: tuple[int, ...], segment: Segment) -> None:
    state = RankingHistory(interactions=tuple(ix(a, k) for k, a in enumerate(ages_ms)))
    assert state.segment(NOW) is segment


@pytest.mark.parametrize(
    ("ages_ms", "session_len"),
    [
        ((), 0),
        ((1_000, 60_000, 120_000), 3),
        ((IDLE_MS + 1,), 0),  # the latest is already too old
        ((IDLE_MS,), 1),  # exactly the idle gap still counts
        ((1_000, 1_000 + IDLE_MS, 1_000 + 2 * IDLE_MS), 3),  # gaps of exactly idle
        ((1_000, 2_000 + IDLE_MS, 3_000 + IDLE_MS), 1),  # a gap longer than idle ends it
        ((0, 10 * 60_000, 20 * 60_000, 60 * 60_000, 61 * 60_000), 3),
    ],
    ids=[
        "empty",
        "continuous",
        "latest-too-old",
        "latest-at-idle",
        "chain-of-exact-gaps",
        "gap-ends-session",
        "older-session-excluded",
    ],
)
def test_session(ages_ms: tuple[int, ...], session_len: int) -> None:
    interactions = tuple(ix(a, k) for k, a in enumerate(ages_ms))
    state = RankingHistory(interactions=interactions)
    assert state.session(NOW, IDLE_MS) == interactions[:session_len]


def test_interactions_since() -> None:
    state = RankingHistory(interactions=(ix(0), ix(10), ix(20)))
    assert [i.timestamp_ms for i in state.interactions_since(NOW - 10)] == [NOW, NOW - 10]
