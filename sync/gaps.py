"""Whether an edge has missed sync messages: pure rules over stream ids and sequences.

An edge knows the id of the last entry of its region's stream it went past and the
sequence of the last message it applied (its ``Cursor``). The publisher chains each
stream's entries: an entry's ``p`` is the sequence of the entry before it in that stream
(sequence numbers alone jump wherever a message went to other regions only). The rules:

1. **Chain** (every entry read): the entry must follow the last one applied, ``p`` equal
   to the cursor's sequence. Anything else is a gap: MAXLEN trimmed the stream past an edge
   that was stopped or too slow, an entry was deleted, the origin's Redis lost its data and
   started again at ``p = 0``, or a message of the chain could not be decoded (a message
   the edge could not read is a message it missed).
2. **Stream lost** (at start and after every reconnection): a cursor past ``0-0`` in a
   stream that is missing or empty. Trimming never empties a stream, so it was lost with
   whatever the edge had not read yet (a Redis restarted without its data, a deleted key);
   the edge then reads the new stream from its beginning.
3. **Trimmed past the cursor** (at start, only for a cursor without a sequence): the
   stream's first entry comes after the entry right after the cursor. Ids are not dense,
   so this may see a gap where there is none; never the reverse.

After a gap the edge has dropped what it could no longer prove fresh; the entry that
revealed it is applied and the chain starts again from it, even if its sequence is not
above the last one applied (a restarted origin sequence). Otherwise an entry whose
sequence is not above the last one applied is skipped as already applied: the publisher
never writes one, but a copied old entry would be one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum, StrEnum

# Position before a stream's first entry.
ORIGIN = "0-0"
_MAX_ID_SEQ = 2**64 - 1

StreamId = tuple[int, int]
_ID = re.compile(r"([0-9]{1,20})-([0-9]{1,20})")


def parse_id(raw: bytes | str) -> StreamId:
    """``b"1767225600000-3"`` -> ``(1767225600000, 3)``; ValueError for anything else."""
    match = _ID.fullmatch(raw.decode("ascii", "replace") if isinstance(raw, bytes) else raw)
    if match is None:
        raise ValueError(f"not a stream id: {raw!r}")
    return int(match[1]), int(match[2])


def next_id(entry_id: StreamId) -> StreamId:
    """The smallest id after ``entry_id``."""
    ms, seq = entry_id
    return (ms + 1, 0) if seq == _MAX_ID_SEQ else (ms, seq + 1)


class Verdict(Enum):
    APPLY = "apply"
    GAP = "gap"  # call on_gap, then apply; the chain starts again from this entry
    DUPLICATE = "duplicate"  # already applied: skip


def verdict(last_seq: int | None, prev: int, seq: int) -> Verdict:
    """What to do with an entry (sequence ``seq``, previous in its stream ``prev``) when the
    last message applied had ``last_seq`` (None: nothing to check against)."""
    if last_seq is None:
        return Verdict.APPLY
    if prev != last_seq:
        return Verdict.GAP
    if seq <= last_seq:
        return Verdict.DUPLICATE
    return Verdict.APPLY


class GapKind(StrEnum):
    CHAIN = "chain"  # rule 1: the entry read does not follow the last one applied
    LOST = "lost"  # rule 2: the stream is missing or empty under a cursor
    TRIMMED = "trimmed"  # rule 3: the stream starts after the cursor's next entry
    CURSOR = "cursor"  # the stored cursor cannot be read: where the edge was is unknown
    UNAPPLIED = "unapplied"  # ``apply`` raised: the message is as good as missed


def gap_at_start(entry_id: str, last_seq: int | None, first_id: str | None) -> GapKind | None:
    """Rules 2 and 3, for a cursor at ``entry_id`` (last applied sequence ``last_seq``)
    and a stream whose first entry is ``first_id`` (None: missing or empty)."""
    if entry_id == ORIGIN:
        return None
    if first_id is None:
        return GapKind.LOST
    if last_seq is None and parse_id(first_id) > next_id(parse_id(entry_id)):
        return GapKind.TRIMMED
    return None


@dataclass(frozen=True, slots=True)
class Gap:
    """What ``on_gap`` is told."""

    kind: GapKind
    region: str
    entry_id: str  # the cursor's entry id when the gap was found
    last_seq: int | None  # the last sequence applied before it
    next_seq: int | None  # the sequence of the entry that revealed it, if one did
    detail: str
