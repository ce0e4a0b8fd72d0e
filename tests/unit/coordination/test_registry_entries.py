"""Which entries of the process registry are kept (``coordination.registry.current``)."""

from __future__ import annotations

import pytest

from coordination.registry import Registered, current
from protocol.keys import REGISTRY_FORGET_S

NOW_MS = 10_000_000


def entry(url: str, seen_ms: int, kind: str = "edge") -> str:
    return Registered("e", "edge", "r", url, seen_ms).encode().replace('"edge"', f'"{kind}"', 1)


@pytest.mark.parametrize(
    ("raw", "kept", "forgotten"),
    [
        ({"u1": entry("u1", NOW_MS - 1_000)}, ["u1"], []),
        # silent but recent: kept (the page shows it unreachable, with its age)
        ({"u1": entry("u1", NOW_MS - (REGISTRY_FORGET_S - 1) * 1000)}, ["u1"], []),
        # silent for longer: forgotten
        ({"u1": entry("u1", NOW_MS - (REGISTRY_FORGET_S + 1) * 1000)}, [], ["u1"]),
        ({"u1": "not json"}, [], ["u1"]),
        ({"u1": '{"name": "x"}'}, [], ["u1"]),  # fields missing
        ({"u1": entry("u1", NOW_MS, kind="worker")}, [], ["u1"]),  # no such kind
        ({b"u1": entry("u1", NOW_MS).encode()}, ["u1"], []),  # as Redis answers
    ],
)
def test_current(
    raw: dict[str | bytes, str | bytes], kept: list[str], forgotten: list[str]
) -> None:
    entries, forget = current(raw, NOW_MS)
    assert [e.url for e in entries] == kept
    assert forget == forgotten


def test_an_entry_reads_back_as_written() -> None:
    written = Registered("edge-us-east", "edge", "us-east", "http://127.0.0.1:8101", 42)
    assert Registered.decode(written.encode()) == written
