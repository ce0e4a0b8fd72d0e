from __future__ import annotations

import pytest

from edge.cache import EdgeCache, Entry
from protocol.api import ItemMetadata, RankedItem
from tests.fakes import FakeClock


def item(n: int) -> RankedItem:
    return RankedItem(
        item_id=f"it-{n}",
        rank=n,
        score=1.0 - n / 100,
        source="trending",
        metadata=ItemMetadata(title=f"Item {n}", category="Books", price=9.99, image_url="u"),
    )


def entry(n_items: int, *, complete: bool = False, expires_at: float = 1e12) -> Entry:
    return Entry(
        items=tuple(item(n) for n in range(1, n_items + 1)),
        complete=complete,
        model_version="m",
        exploration_applied=False,
        stored_at=0.0,
        expires_at=expires_at,
    )


@pytest.mark.parametrize(
    ("n_items", "complete", "count", "exclude", "expected"),
    [
        (5, False, 3, set(), ["it-1", "it-2", "it-3"]),
        (5, False, 3, {"it-2"}, ["it-1", "it-3", "it-4"]),
        (5, False, 5, set(), ["it-1", "it-2", "it-3", "it-4", "it-5"]),
        (5, False, 5, {"it-1"}, None),  # cannot fill: ask the origin
        (5, True, 5, {"it-1"}, ["it-2", "it-3", "it-4", "it-5"]),  # nothing more exists
        (2, True, 10, set(), ["it-1", "it-2"]),
    ],
)
def test_select_applies_exclusions_and_count_after_the_lookup(
    n_items: int, complete: bool, count: int, exclude: set[str], expected: list[str] | None
) -> None:
    chosen = entry(n_items, complete=complete).select(count, exclude)
    if expected is None:
        assert chosen is None
        return
    assert chosen is not None
    assert [i.item_id for i in chosen] == expected
    assert [i.rank for i in chosen] == list(range(1, len(expected) + 1))


def test_partial_select_serves_what_there_is() -> None:
    chosen = entry(5).select(5, {"it-1"}, partial=True)
    assert [i.item_id for i in chosen] == ["it-2", "it-3", "it-4", "it-5"]


def test_select_leaves_the_entry_untouched() -> None:
    cached = entry(5)
    cached.select(2, {"it-1"})
    assert [i.rank for i in cached.items] == [1, 2, 3, 4, 5]


def test_entries_expire_by_the_injected_clock() -> None:
    clock = FakeClock(now=100.0)
    cache = EdgeCache(max_entries=10, clock=clock)
    cache.put("k", entry(1, expires_at=160.0))
    assert cache.get("k") is not None
    clock.tick(59.9)
    assert cache.get("k") is not None
    clock.tick(0.1)
    assert cache.get("k") is None
    assert len(cache) == 0


def test_least_recently_used_entry_is_evicted() -> None:
    cache = EdgeCache(max_entries=2, clock=FakeClock(now=0.0))
    cache.put("a", entry(1))
    cache.put("b", entry(1))
    assert cache.get("a") is not None  # a becomes most recent
    cache.put("c", entry(1))
    assert cache.get("b") is None
    assert cache.get("a") is not None
    assert cache.get("c") is not None
