"""The origins' control stream over a real Redis: the edges' publisher script writes it,
the edges' subscriber reads it, and no edge is ever sent what only origins read."""

from __future__ import annotations

import time
from typing import cast

import pytest
from redis.asyncio import Redis

from protocol import keys
from sync.codec import decode_entry
from sync.cursor import MemoryCursor
from sync.messages import CatalogChange, Envelope, InvalidateKey, ModelEpoch
from sync.publisher import SyncPublisher
from sync.subscriber import SyncSubscriber, newest_cursor
from tests.integration.test_sync import Edge, running, until

# The stream's keys share the {sync} slot: the same on a Redis Cluster.
pytestmark = pytest.mark.cluster

REGIONS = ("eu", "us")


async def entries(redis: Redis, stream: str) -> list[tuple[Envelope, int]]:
    found = cast(list[tuple[bytes, dict[bytes, bytes]]], await redis.xrange(stream))
    return [decode_entry(fields) for _, fields in found]


def origin_reader(redis: Redis, seen: Edge, cursor: MemoryCursor | None = None) -> SyncSubscriber:
    return SyncSubscriber(
        redis,
        "origins",
        seen.apply,
        cursor or MemoryCursor(),
        time.time,
        on_gap=seen.on_gap,
        block_ms=50,
        stream=keys.ORIGINS_SYNC_STREAM,
    )


async def test_an_epoch_reaches_every_region_and_the_origins_a_catalog_change_the_origins_only(
    redis: Redis,
) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    assert await publisher.publish([InvalidateKey("k")]) == [1]
    assert await publisher.publish([ModelEpoch(1, "nn-1")], origins=True) == [2]
    change = CatalogChange("o-1", 4, "items", ("it-1",))
    assert await publisher.publish_to_origins([change]) == [3]
    assert await publisher.publish([InvalidateKey("k2")]) == [4]
    for region in REGIONS:
        seen = [(e.seq, prev) for e, prev in await entries(redis, keys.edge_sync_stream(region))]
        assert seen == [(1, 0), (2, 1), (4, 2)]  # a chain with a hole, which is no gap
    origins = await entries(redis, keys.ORIGINS_SYNC_STREAM)
    assert [(e.seq, prev, e.message) for e, prev in origins] == [
        (2, 0, ModelEpoch(1, "nn-1")),
        (3, 2, change),
    ]


async def test_no_edge_is_sent_what_only_origins_read(redis: Redis) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    change = CatalogChange("o-1", 1)
    for call in (
        publisher.publish([change]),
        publisher.publish([InvalidateKey("k"), change], origins=True),
    ):
        with pytest.raises(ValueError, match="CatalogChange: for the origins' stream only"):
            await call
    for stream in (*map(keys.edge_sync_stream, REGIONS), keys.ORIGINS_SYNC_STREAM):
        assert await redis.xlen(stream) == 0
    assert await publisher.publish_to_origins([]) == []


async def test_an_origin_reads_the_stream_in_order_from_where_it_started(redis: Redis) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    await publisher.publish_to_origins([CatalogChange("o-1", 1)])  # before it started
    # taken before loading what it holds: what is published meanwhile is read
    cursor = await newest_cursor(redis, keys.ORIGINS_SYNC_STREAM)
    await publisher.publish([ModelEpoch(1, "nn-1")], origins=True)
    seen = Edge()
    reader = origin_reader(redis, seen, MemoryCursor(cursor))
    async with running(reader):
        await publisher.publish([InvalidateKey("edges only")])
        await publisher.publish_to_origins([CatalogChange("o-1", 2, item_ids=("a",))])
        await until(lambda: len(seen.applied) == 2)
    assert [e.message for e in seen.applied] == [
        ModelEpoch(1, "nn-1"),
        CatalogChange("o-1", 2, item_ids=("a",)),
    ]
    assert seen.gaps == []


async def test_the_origins_stream_keeps_a_thousand_entries_or_so(redis: Redis) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    for batch in range(30):
        changes = [CatalogChange("o-1", batch * 100 + n, item_ids=("a",)) for n in range(100)]
        await publisher.publish_to_origins(changes)
    length = await redis.xlen(keys.ORIGINS_SYNC_STREAM)
    # MAXLEN ~ trims whole radix-tree nodes (100 entries each by default)
    assert keys.ORIGINS_SYNC_MAXLEN <= length <= keys.ORIGINS_SYNC_MAXLEN + 100
    # an origin whose last message applied is older than what the stream keeps finds a gap
    seen = Edge()
    behind = origin_reader(redis, seen, MemoryCursor(await newest_cursor(redis, "missing")))
    async with running(behind):
        await until(lambda: len(seen.gaps) == 1)
