"""Dedup key names and TTLs (``protocol.dedup``): the strings are a contract with the data
already in Redis, and their hash tags decide which script may touch them."""

from __future__ import annotations

import re

import pytest

from protocol import dedup, keys

HASH_TAG = re.compile(r"\{([^}]*)\}")


def tag(key: str) -> str:
    match = HASH_TAG.search(key)
    assert match is not None, key
    return match.group(1)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (dedup.feedback_seen(3, "u-1", "ix-9"), "events:{3}:seen:u-1:ix-9"),
        (dedup.bandit_applied("mobile_evening", "ix-9"), "bandit:{mobile_evening}:applied:ix-9"),
        (dedup.feedback_dedup("u-1", "it-7", "click"), "feedback_dedup:{u-1}:it-7:click"),
        (dedup.request_dedup("req-42"), "request_dedup:{req-42}"),
    ],
)
def test_key_names(key: str, expected: str) -> None:
    assert key == expected


@pytest.mark.parametrize(
    ("mark", "slot_of"),
    [
        # Set by the intake script that appends to the partition's stream.
        (dedup.feedback_seen(5, "u", "ix"), keys.events_stream(5)),
        # Set by the script that updates the cell's posteriors and rank.
        (dedup.bandit_applied("s", "ix"), keys.bandit_posteriors("s")),
        (dedup.bandit_applied("s", "ix"), keys.bandit_rank("s")),
        # With the user's other keys.
        (dedup.feedback_dedup("u", "it", "click"), keys.user_record("u")),
    ],
)
def test_a_mark_shares_the_slot_of_what_its_script_writes(mark: str, slot_of: str) -> None:
    assert tag(mark) == tag(slot_of)


@pytest.mark.parametrize(
    ("ttl_s", "expected"),
    [
        (dedup.BANDIT_APPLIED_TTL_S, 3600),
        (dedup.FEEDBACK_DEDUP_TTL_S, 60),  # seed 001
        (dedup.REQUEST_DEDUP_TTL_S, 30),  # seed 001
    ],
)
def test_ttls(ttl_s: int, expected: int) -> None:
    assert ttl_s == expected


def test_single_flight_key() -> None:
    assert keys.idempotency("vector_rebuild", "ns-1") == "idem:vector_rebuild:ns-1"
