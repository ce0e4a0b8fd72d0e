"""Pure rules of the sync subscriber: continuity, cursors, back-off."""

from __future__ import annotations

import pytest

from sync.cursor import Cursor, MemoryCursor, format_cursor, parse_cursor
from sync.exceptions import MalformedMessage
from sync.gaps import GapKind, Verdict, gap_at_start, next_id, parse_id, verdict
from sync.subscriber import backoff_s


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        (b"1767225600000-0", (1_767_225_600_000, 0)),
        ("1767225600000-12", (1_767_225_600_000, 12)),
        ("0-0", (0, 0)),
        ("18446744073709551615-18446744073709551615", (2**64 - 1, 2**64 - 1)),
    ],
)
def test_stream_ids_parse(raw: bytes | str, parsed: tuple[int, int]) -> None:
    assert parse_id(raw) == parsed


@pytest.mark.parametrize(
    "raw", ["", "5", "5-", "-5", "a-1", "1-b", "1-2-3", " 1-2", "1-²", b"\xff-1"]
)
def test_other_stream_ids_are_refused(raw: bytes | str) -> None:
    with pytest.raises(ValueError, match="not a stream id"):
        parse_id(raw)


@pytest.mark.parametrize(
    ("entry_id", "following"),
    [((5, 0), (5, 1)), ((5, 7), (5, 8)), ((5, 2**64 - 1), (6, 0))],
)
def test_next_id(entry_id: tuple[int, int], following: tuple[int, int]) -> None:
    assert next_id(entry_id) == following


@pytest.mark.parametrize(
    ("last_seq", "prev", "seq", "expected"),
    [
        # nothing to check against: fresh start on an unknown entry, or just after a gap
        (None, 0, 1, Verdict.APPLY),
        (None, 40, 41, Verdict.APPLY),
        # the chain holds
        (0, 0, 1, Verdict.APPLY),  # the first message ever published to the stream
        (7, 7, 8, Verdict.APPLY),
        (7, 7, 12, Verdict.APPLY),  # 8..11 went to other regions only: no loss
        # the chain breaks
        (7, 9, 12, Verdict.GAP),  # the entry holding 9 never reached this edge (trimmed)
        (7, 6, 12, Verdict.GAP),  # an entry before 7 re-linked: the stream was rewritten
        (105, 0, 1, Verdict.GAP),  # the origin's Redis lost its data and started again
        (0, 3, 4, Verdict.GAP),  # fresh on an empty stream, then trimmed before the read
        # following the last entry, yet not newer: a copied old entry
        (7, 7, 7, Verdict.DUPLICATE),
        (7, 7, 3, Verdict.DUPLICATE),
    ],
)
def test_verdicts(last_seq: int | None, prev: int, seq: int, expected: Verdict) -> None:
    assert verdict(last_seq, prev, seq) is expected


@pytest.mark.parametrize(
    ("entry_id", "last_seq", "first_id", "expected"),
    [
        # before the first entry: nothing can be missing
        ("0-0", 0, None, None),
        ("0-0", None, "100-0", None),
        # the stream is gone under the cursor
        ("100-0", 5, None, GapKind.LOST),
        ("100-0", None, None, GapKind.LOST),
        # known sequence: the chain check on the next entry decides, exactly
        ("100-0", 5, "90-0", None),
        ("100-0", 5, "500-0", None),
        # unknown sequence: the id rule
        ("100-0", None, "90-0", None),
        ("100-0", None, "100-0", None),
        ("100-0", None, "100-1", None),  # the very next id: nothing between
        ("100-0", None, "100-2", GapKind.TRIMMED),
        ("100-0", None, "101-0", GapKind.TRIMMED),
    ],
)
def test_gaps_at_start(
    entry_id: str, last_seq: int | None, first_id: str | None, expected: GapKind | None
) -> None:
    assert gap_at_start(entry_id, last_seq, first_id) is expected


@pytest.mark.parametrize(
    ("cursor", "text"),
    [
        (Cursor("1767225600000-3", 42), "1767225600000-3 42"),
        (Cursor("1767225600000-3", None), "1767225600000-3"),
        (Cursor("0-0", 0), "0-0 0"),
    ],
)
def test_cursors_round_trip(cursor: Cursor, text: str) -> None:
    assert format_cursor(cursor) == text
    assert parse_cursor(text) == cursor


@pytest.mark.parametrize("text", ["", "x", "5 5", "5-0 x", "5-0 -1", "5-0 4 2", "5-0 ³"])
def test_unreadable_cursors_are_refused(text: str) -> None:
    with pytest.raises(MalformedMessage, match="cursor"):
        parse_cursor(text)


async def test_memory_cursor_keeps_the_last_save() -> None:
    store = MemoryCursor()
    assert await store.load() is None
    await store.save(Cursor("5-0", 3))
    await store.save(Cursor("6-0", 4))
    assert await store.load() == Cursor("6-0", 4)


@pytest.mark.parametrize(
    ("attempt", "draw", "pause"),
    [
        (0, 0.0, 0.05),
        (0, 0.999, 0.09995),
        (1, 0.0, 0.1),
        (3, 0.5, 0.6),
        (5, 0.0, 1.0),  # the step reached the cap: between 1 and 2 s
        (5, 0.999, 1.999),
        (60, 0.0, 1.0),  # no overflow however long the outage
        (10_000, 0.5, 1.5),
    ],
)
def test_backoff_doubles_up_to_its_cap_with_jitter(attempt: int, draw: float, pause: float) -> None:
    assert backoff_s(attempt, 0.1, 2.0, draw) == pytest.approx(pause)
