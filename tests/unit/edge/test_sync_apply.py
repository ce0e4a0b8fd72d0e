"""What an edge does with each sync message, against the real in-process store."""

from __future__ import annotations

import pytest

from edge.cache import Entry
from edge.entry_store import MemoryEntryStore
from edge.sync_apply import Staleness, SyncApplier
from protocol.histogram import LatencyHistogram
from sync.messages import (
    Envelope,
    InvalidateKey,
    InvalidateSegment,
    InvalidateUser,
    ItemUpdate,
    Message,
    ModelEpoch,
    PurgeTag,
    UserUpdate,
)
from tests.entries import SHARED, K
from tests.fakes import FakeClock

# key -> tags of its entry
ENTRIES = {
    "ann-home": ("it-1", "it-2", "segment:power", "user:ann"),
    "bob-home": ("it-2", "it-3", "segment:active", "user:bob"),
    "casual-home": ("it-1", "it-3", "segment:casual"),
    "new-home": ("it-4", "segment:new"),
}


def entry(tags: tuple[str, ...], now: float, generation: int) -> Entry:
    return Entry(
        audience=SHARED,
        items=(),
        complete=True,
        model_version="m",
        exploration_applied=False,
        expires_at=now + 300,
        filled_at=now,
        stale_until=now + 3600,
        generation=generation,
        tags=tags,
    )


async def filled() -> tuple[MemoryEntryStore, SyncApplier, Staleness, FakeClock]:
    clock = FakeClock()
    store = MemoryEntryStore(max_bytes=10**7, clock=clock)
    for key, tags in ENTRIES.items():
        await store.put(K(key), entry(tags, clock(), store.next_generation()))
    staleness = Staleness()
    clock.tick(1)
    return store, SyncApplier(store, staleness, clock=clock), staleness, clock


def envelope(message: Message, seq: int = 1, published_ms: int = 0) -> Envelope:
    return Envelope(seq=seq, published_at_ms=published_ms, message=message)


@pytest.mark.parametrize(
    ("message", "left"),
    [
        (InvalidateUser("ann", reason="purchase"), {"bob-home", "casual-home", "new-home"}),
        (UserUpdate("bob", version=3), {"ann-home", "casual-home", "new-home"}),
        (InvalidateUser("carol", reason="purchase"), set(ENTRIES)),
        (InvalidateSegment("casual"), {"ann-home", "bob-home", "new-home"}),
        (InvalidateKey("new-home"), {"ann-home", "bob-home", "casual-home"}),
        (PurgeTag("it-1", soft=False), {"bob-home", "new-home"}),
        (PurgeTag("it-9", soft=False), set(ENTRIES)),
        (ItemUpdate("it-3", in_stock=False, price=None), {"ann-home", "new-home"}),
        (ItemUpdate("it-3", in_stock=None, price=12.5), {"ann-home", "new-home"}),
        (ItemUpdate("it-3", in_stock=True, price=None), set(ENTRIES)),
        (ItemUpdate("it-1", in_stock=False, price=None, removed=True), {"bob-home", "new-home"}),
        # removed without in_stock: purged all the same
        (ItemUpdate("it-4", in_stock=None, price=None, removed=True), set(ENTRIES) - {"new-home"}),
        (PurgeTag("it-1", soft=True), set(ENTRIES)),  # soft: kept, but stale
        (ModelEpoch(2, "nn-2"), set(ENTRIES)),
    ],
)
async def test_hard_invalidations_remove_exactly_the_tagged_entries(
    message: Message, left: set[str]
) -> None:
    store, applier, _, _ = await filled()
    await applier.apply(envelope(message))
    assert {key for key in ENTRIES if await store.get(K(key)) is not None} == left
    assert applier.counters.applied == 1


@pytest.mark.parametrize(
    ("message", "forgotten"),
    [
        (ItemUpdate("it-1", in_stock=False, price=None, removed=True), ["it-1"]),
        (ItemUpdate("it-1", in_stock=False, price=None), []),
        (PurgeTag("it-1", soft=False), []),
    ],
)
async def test_a_removed_item_is_forgotten_beyond_its_entries(
    message: Message, forgotten: list[str]
) -> None:
    store, _, staleness, clock = await filled()
    seen: list[str] = []
    applier = SyncApplier(store, staleness, clock=clock, forget_item=seen.append)
    await applier.apply(envelope(message))
    assert seen == forgotten


@pytest.mark.parametrize(
    ("message", "stale"),
    [
        (PurgeTag("it-1", soft=True), {"ann-home", "casual-home"}),
        (PurgeTag("it-9", soft=True), set()),
        (ModelEpoch(2, "nn-2"), set(ENTRIES)),
        (InvalidateUser("ann", reason="purchase"), set()),
    ],
)
async def test_soft_purges_make_entries_stale_not_gone(message: Message, stale: set[str]) -> None:
    store, applier, staleness, _ = await filled()
    await applier.apply(envelope(message))
    found = {key: await store.get(K(key)) for key in ENTRIES}
    assert {k for k, e in found.items() if e is not None and staleness.is_stale(e)} == stale


async def test_entries_filled_after_a_soft_purge_are_fresh() -> None:
    store, applier, staleness, clock = await filled()
    await applier.apply(envelope(ModelEpoch(2, "nn-2")))
    clock.tick(1)
    refilled = entry(ENTRIES["new-home"], clock(), store.next_generation())
    assert not staleness.is_stale(refilled)


async def test_an_older_epoch_changes_nothing() -> None:
    _, applier, staleness, clock = await filled()
    await applier.apply(envelope(ModelEpoch(5, "nn-5")))
    moment = staleness.all_before
    clock.tick(10)
    await applier.apply(envelope(ModelEpoch(4, "nn-4")))
    assert (applier.model_epoch, applier.model_version) == (5, "nn-5")
    assert staleness.all_before == moment


async def test_a_gap_makes_everything_stale() -> None:
    store, applier, staleness, _ = await filled()
    await applier.on_gap("trimmed past the cursor")
    assert applier.counters.gaps == 1
    for key in ENTRIES:
        cached = await store.get(K(key))
        assert cached is not None
        assert staleness.is_stale(cached)


def test_soft_tag_purges_are_bounded() -> None:
    staleness = Staleness()
    for n in range(10_005):
        staleness.purge_tag(f"t{n}", float(n))
    assert len(staleness.tags) == 10_000
    assert staleness.all_before == 4.0  # the oldest moments folded into "everything"


@pytest.mark.parametrize(
    ("samples", "buckets"),
    [
        ([0.5, 3.0, 3.0, 7000.0], {"0.001": 1, "0.005": 3, "5.0": 3, "+Inf": 4}),
        ([], {"0.001": 0, "+Inf": 0}),
    ],
)
def test_latency_histogram(samples: list[float], buckets: dict[str, int]) -> None:
    histogram = LatencyHistogram()
    for ms in samples:
        histogram.observe(ms)
    cumulative = dict(histogram.cumulative())
    for le, count in buckets.items():
        assert cumulative[le] == count
    assert histogram.total == len(samples)


async def test_publish_to_applied_latency_is_observed() -> None:
    _, applier, _, clock = await filled()
    await applier.apply(envelope(InvalidateKey("k"), published_ms=int(clock() * 1000) - 12))
    assert dict(applier.counters.latency.cumulative())["0.02"] == 1
