"""What only the in-process store has: a byte budget and LRU eviction, entries dropped at
``stale_until`` by the injected clock (the tests of the edge's former in-process cache,
ported), and the generations both stores stamp fills with."""

from __future__ import annotations

import itertools
import time

import pytest

from edge.cache.entry import CachedItem, Entry
from edge.cache.store import Generations, MemoryEntryStore
from tests.entries import SHARED, K
from tests.fakes import FakeClock
from tests.unit.edge.cache.test_entry import ranked

_generations = itertools.count(1)


def entry(
    n_items: int,
    *,
    expires_at: float = 1e12,
    stale_until: float | None = None,
    tags: tuple[str, ...] = (),
) -> Entry:
    return Entry(
        audience=SHARED,
        items=tuple(CachedItem.of(ranked(n)) for n in range(1, n_items + 1)),
        complete=False,
        model_version="m",
        exploration_applied=False,
        expires_at=expires_at,
        stale_until=expires_at if stale_until is None else stale_until,
        generation=next(_generations),
        tags=tags,
    )


async def test_entries_go_at_stale_until_by_the_injected_clock() -> None:
    clock = FakeClock(now=100.0)
    store = MemoryEntryStore(max_bytes=10**6, clock=clock)
    await store.put(K("k"), entry(1, expires_at=160.0, stale_until=220.0))
    clock.tick(60.0)  # no longer fresh, still servable
    assert await store.get(K("k")) is not None
    clock.tick(59.9)
    assert await store.get(K("k")) is not None
    clock.tick(0.1)
    assert await store.get(K("k")) is None
    assert await store.size() == 0
    assert store.bytes == 0


async def test_least_recently_used_entries_go_when_over_budget() -> None:
    size = entry(1).size
    store = MemoryEntryStore(max_bytes=2 * size, clock=FakeClock(now=0.0))
    await store.put(K("a"), entry(1))
    await store.put(K("b"), entry(1))
    assert await store.get(K("a")) is not None  # a becomes most recent
    await store.put(K("c"), entry(1))
    assert await store.get(K("b")) is None
    assert await store.get(K("a")) is not None
    assert await store.get(K("c")) is not None
    assert store.bytes == 2 * size


async def test_entries_past_stale_until_are_dropped_on_the_next_write_without_being_read() -> None:
    clock = FakeClock(now=0.0)
    store = MemoryEntryStore(max_bytes=10**6, clock=clock)
    await store.put(K("old"), entry(3, expires_at=10.0, stale_until=20.0))
    clock.tick(15)
    await store.put(K("new"), entry(3, expires_at=100.0))
    assert store.bytes == 2 * entry(3).size  # stale, not gone: stale-if-error may use it
    clock.tick(6)
    await store.put(K("newer"), entry(3, expires_at=100.0))
    assert await store.size() == 2
    assert store.bytes == 2 * entry(3).size


async def test_replacing_a_key_keeps_the_accounting_right() -> None:
    store = MemoryEntryStore(max_bytes=10**6, clock=FakeClock(now=0.0))
    await store.put(K("k"), entry(5, tags=("it-1",)))
    await store.put(K("k"), entry(2))
    assert await store.size() == 1
    assert store.bytes == entry(2).size


async def test_a_refused_put_changes_nothing() -> None:
    store = MemoryEntryStore(max_bytes=10**6, clock=FakeClock(now=0.0))
    older, newer = entry(5), entry(2)
    await store.put(K("k"), newer)
    assert await store.put(K("k"), older) is False
    assert store.bytes == newer.size
    assert await store.get(K("k")) is newer


async def test_a_hit_is_the_stored_object_itself() -> None:
    store = MemoryEntryStore(max_bytes=10**6, clock=FakeClock(now=0.0))
    stored = entry(2)
    await store.put(K("k"), stored)
    assert await store.get(K("k")) is stored


async def test_a_swap_keeps_the_table_within_the_budget() -> None:
    size = entry(1).size
    clock = FakeClock(now=0.0)
    store = MemoryEntryStore(max_bytes=3 * size, clock=clock)
    table = {K(f"k{n}"): entry(1) for n in range(5)}
    table[K("gone")] = entry(1, expires_at=-1.0)
    await store.swap_all(table)
    assert store.bytes <= 3 * size
    assert await store.size() == 3
    assert await store.get(K("k4")) is not None  # the last of the table are kept
    assert await store.get(K("k0")) is None


async def test_deletes_release_their_bytes() -> None:
    store = MemoryEntryStore(max_bytes=10**6, clock=FakeClock(now=0.0))
    await store.put(K("a"), entry(2, tags=("it-1",)))
    await store.put(K("b"), entry(3, tags=("it-1", "it-2")))
    await store.put(K("c"), entry(4))
    assert await store.delete("c") is True
    assert await store.delete_tag("it-2") == 1
    assert store.bytes == entry(2, tags=("it-1",)).size
    await store.clear()
    assert store.bytes == 0


@pytest.mark.parametrize(
    ("clock_readings", "expected"),
    [
        ([10, 20, 30], [10, 20, 30]),  # the clock, when it moves
        ([10, 10, 10], [10, 11, 12]),  # faster than it ticks
        ([10, 5, 11, 40], [10, 11, 12, 40]),  # it stepped back
        ([0, 0], [1, 2]),  # never 0: a put of generation 0 is never newer than anything
    ],
)
def test_generations_follow_the_clock_and_only_grow(
    clock_readings: list[int], expected: list[int]
) -> None:
    readings = iter(clock_readings)
    generations = Generations(lambda: next(readings))
    assert [generations() for _ in clock_readings] == expected


def test_generations_are_microseconds_of_the_wall_clock() -> None:
    before = time.time_ns() // 1000
    generation = Generations()()
    assert before <= generation <= time.time_ns() // 1000
