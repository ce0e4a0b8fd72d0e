from __future__ import annotations

import pytest

from edge.cache.removed_items import RemovedItems
from tests.fakes import FakeClock


@pytest.mark.parametrize(
    ("removals", "after_s", "removed", "kept"),
    [
        # (item, seconds after the start it is removed at)
        ([], 0, set(), ["a", "b"]),
        ([("a", 0)], 0, {"a"}, ["b"]),
        ([("a", 0)], 299.9, {"a"}, ["b"]),
        ([("a", 0)], 300, set(), ["a", "b"]),  # forgotten after five minutes
        ([("a", 0), ("b", 200)], 350, {"b"}, ["a"]),
        ([("a", 0), ("a", 200)], 450, {"a"}, ["b"]),  # a second removal starts over
        ([("a", 0), ("b", 0)], 10, {"a", "b"}, []),
    ],
)
def test_removals_are_remembered_for_five_minutes(
    removals: list[tuple[str, float]], after_s: float, removed: set[str], kept: list[str]
) -> None:
    clock = FakeClock()
    start = clock()
    memory = RemovedItems(clock=clock)
    for item_id, at in removals:
        clock.now = start + at
        memory.add(item_id)
    clock.now = start + after_s
    assert {i for i in ("a", "b") if i in memory} == removed
    ids = ["a", "b"]
    assert [ids[n] for n in memory.kept(ids)] == kept
    assert len(memory) == len(removed)


def test_the_oldest_removals_go_first_beyond_the_bound() -> None:
    memory = RemovedItems(clock=FakeClock(), max_items=2)
    for item_id in ("a", "b", "c"):
        memory.add(item_id)
    assert ("a" in memory, "b" in memory, "c" in memory) == (False, True, True)
