from __future__ import annotations

import pytest

from origin.event_streams.streams import needed_from, stream_id


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [(b"1700000000000-3", (1700000000000, 3)), ("5-0", (5, 0)), ("0-0", (0, 0)), ("7", (7, 0))],
)
def test_stream_id(raw: bytes | str, parsed: tuple[int, int]) -> None:
    assert stream_id(raw) == parsed


@pytest.mark.parametrize(
    ("last_delivered", "oldest_pending", "needed"),
    [
        (b"10-0", None, (10, 1)),
        (b"10-0", b"4-1", (4, 1)),
        (b"10-0", b"10-0", (10, 0)),
        ("3-2", "3-1", (3, 1)),
        ("0-0", None, (0, 1)),  # nothing delivered yet: everything
        (f"7-{2**64 - 1}", None, (8, 0)),  # the last sequence of a millisecond
    ],
)
def test_a_group_needs_its_oldest_pending_entry_else_what_follows_its_last_delivered(
    last_delivered: bytes | str, oldest_pending: bytes | str | None, needed: tuple[int, int]
) -> None:
    """``oldest_pending`` is None when the entries a group's summary counted as pending were
    all acknowledged before XPENDING ran: found by benchmarks.faults, it crashed a worker."""
    assert needed_from(last_delivered, oldest_pending) == needed
