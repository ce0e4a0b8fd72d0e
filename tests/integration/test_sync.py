"""Origin-to-edge sync over a real Redis: publisher, subscribers, cursors, gaps, failures."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from perso.redis_server import RedisServer
from protocol import keys
from redis_client.client import RedisClient, connect, open_client
from sync.codec import decode_entry
from sync.cursor import Cursor, MemoryCursor, RedisCursor
from sync.exceptions import PublishFailed
from sync.gaps import Gap, GapKind
from sync.messages import Envelope, InvalidateKey, InvalidateUser, Message, PurgeTag
from sync.publisher import PUBLISH, SyncPublisher
from sync.subscriber import SyncSubscriber
from tests.fakes import FakeClock

REGIONS = ("eu", "us", "ap")

pytestmark = pytest.mark.cluster


def invalidations(start: int, n: int) -> list[Message]:
    return [InvalidateUser(f"u-{i}", "purchase") for i in range(start, start + n)]


class Edge:
    """What one edge saw: the envelopes it applied and the gaps it was told of, in order."""

    def __init__(self) -> None:
        self.applied: list[Envelope] = []
        self.gaps: list[Gap] = []
        self.events: list[tuple[str, int | None]] = []

    async def apply(self, envelope: Envelope) -> None:
        self.applied.append(envelope)
        self.events.append(("apply", envelope.seq))

    async def on_gap(self, gap: Gap) -> None:
        self.gaps.append(gap)
        self.events.append(("gap", gap.next_seq))

    @property
    def seqs(self) -> list[int]:
        return [e.seq for e in self.applied]


def subscriber(
    redis: RedisClient,
    region: str,
    edge: Edge,
    cursor: MemoryCursor | RedisCursor | None = None,
    *,
    apply: Callable[[Envelope], Awaitable[None]] | None = None,
    batch: int = 500,
) -> SyncSubscriber:
    return SyncSubscriber(
        redis,
        region,
        apply or edge.apply,
        cursor or MemoryCursor(),
        time.time,
        on_gap=edge.on_gap,
        block_ms=50,
        batch=batch,
        backoff_base_s=0.02,
        max_backoff_s=0.2,
    )


@contextlib.asynccontextmanager
async def running(*subscribers: SyncSubscriber) -> AsyncIterator[list[asyncio.Task[None]]]:
    stop = asyncio.Event()
    tasks = [asyncio.create_task(s.run(stop)) for s in subscribers]
    try:
        # Started: every cursor resolved (a fresh start takes the stream's newest entry).
        await until(lambda: all(s.position is not None for s in subscribers))
        yield tasks
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 10)


async def until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.005)


async def stream_entries(redis: RedisClient, region: str) -> list[tuple[Envelope, int]]:
    return [decode_entry(f) for _, f in await redis.xrange(keys.edge_sync_stream(region))]


# --- publisher -------------------------------------------------------------------------


async def test_every_region_gets_every_message_in_order_with_its_sequence(
    redis: RedisClient,
) -> None:
    clock = FakeClock()
    publisher = SyncPublisher(redis, REGIONS, clock)
    assert await publisher.publish(invalidations(0, 3)) == [1, 2, 3]
    clock.tick(0.25)
    assert await publisher.publish([PurgeTag("item:it-1", soft=True)]) == [4]
    assert await publisher.publish([]) == []
    for region in REGIONS:
        entries = await stream_entries(redis, region)
        assert [(e.seq, prev) for e, prev in entries] == [(1, 0), (2, 1), (3, 2), (4, 3)]
        assert [e.message for e, _ in entries] == [
            *invalidations(0, 3),
            PurgeTag("item:it-1", True),
        ]
        assert [e.published_at_ms for e, _ in entries] == [1_767_225_600_000] * 3 + [
            1_767_225_600_250
        ]
    assert await redis.get(keys.EDGE_SYNC_SEQ) == b"4"
    assert publisher.published == 4


async def test_a_message_for_some_regions_leaves_a_hole_in_the_others_but_no_break(
    redis: RedisClient,
) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    await publisher.publish(invalidations(0, 2))
    assert await publisher.publish([InvalidateKey("k")], regions=["eu"]) == [3]
    await publisher.publish(invalidations(2, 1))
    eu = [(e.seq, prev) for e, prev in await stream_entries(redis, "eu")]
    us = [(e.seq, prev) for e, prev in await stream_entries(redis, "us")]
    assert eu == [(1, 0), (2, 1), (3, 2), (4, 3)]
    assert us == [(1, 0), (2, 1), (4, 2)]  # 3 went to eu only: p links 4 to 2


async def test_unknown_regions_are_refused(redis: RedisClient) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    with pytest.raises(ValueError, match="not among"):
        await publisher.publish(invalidations(0, 1), regions=["eu", "mars"])
    with pytest.raises(ValueError, match="not among"):
        await publisher.publish(invalidations(0, 1), regions=[])


async def test_a_publish_lands_everywhere_or_nowhere(redis: RedisClient) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    await publisher.publish(invalidations(0, 1))
    await redis.delete(keys.edge_sync_stream("ap"))
    await redis.set(keys.edge_sync_stream("ap"), "not a stream")
    with pytest.raises(PublishFailed, match="is not a stream"):
        await publisher.publish(invalidations(1, 5))
    await redis.set(keys.edge_sync_last("us"), "garbage")
    await redis.delete(keys.edge_sync_stream("ap"))
    with pytest.raises(PublishFailed, match="is not a number"):
        await publisher.publish(invalidations(1, 5))
    assert await redis.xlen(keys.edge_sync_stream("eu")) == 1
    assert await redis.xlen(keys.edge_sync_stream("us")) == 1
    assert await redis.get(keys.EDGE_SYNC_SEQ) == b"1"


async def test_a_lost_sequence_key_does_not_reuse_numbers(redis: RedisClient) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    await publisher.publish(invalidations(0, 5))
    await redis.delete(keys.EDGE_SYNC_SEQ)
    assert await publisher.publish(invalidations(5, 1)) == [6]


async def test_racing_publishers_keep_every_stream_gap_free_and_ordered(
    redis: RedisClient, redis_url: str
) -> None:
    clients = [await open_client(redis_url) for _ in range(4)]
    publishers = [SyncPublisher(c, REGIONS, time.time) for c in clients]

    async def publish_many(publisher: SyncPublisher, worker: int) -> list[int]:
        seqs = []
        for n in range(50):
            seqs += await publisher.publish(invalidations(worker * 1000 + n * 3, 1 + n % 3))
        return seqs

    try:
        results = await asyncio.gather(*(publish_many(p, i) for i, p in enumerate(publishers)))
    finally:
        for client in clients:
            await client.aclose()
    total = sum(len(r) for r in results)
    assert sorted(s for r in results for s in r) == list(range(1, total + 1))
    for r in results:
        assert r == sorted(r)
    for region in REGIONS:
        entries = await stream_entries(redis, region)
        assert [(e.seq, prev) for e, prev in entries] == [(s, s - 1) for s in range(1, total + 1)]


async def test_maxlen_caps_the_stream(redis: RedisClient) -> None:
    publisher = SyncPublisher(redis, ["eu"], time.time, maxlen=200)
    for n in range(30):
        await publisher.publish(invalidations(n * 100, 100))
    # Approximate trimming drops whole stream nodes (100 entries each by default).
    length = await redis.xlen(keys.edge_sync_stream("eu"))
    assert 200 <= length < 400
    entries = await stream_entries(redis, "eu")
    assert entries[-1][0].seq == 3000


# --- subscribers -----------------------------------------------------------------------


async def test_every_edge_applies_every_message_in_order_while_publishers_race(
    redis: RedisClient, redis_url: str
) -> None:
    edges = {(region, n): Edge() for region in REGIONS for n in range(2)}
    subscribers = [subscriber(redis, region, edge) for (region, _), edge in edges.items()]
    publisher_clients = [await open_client(redis_url) for _ in range(3)]
    publishers = [SyncPublisher(c, REGIONS, time.time) for c in publisher_clients]
    try:
        async with running(*subscribers):

            async def publish_many(publisher: SyncPublisher, worker: int) -> None:
                for n in range(100):
                    await publisher.publish(invalidations(worker * 1000 + n * 2, 2))

            await asyncio.gather(*(publish_many(p, i) for i, p in enumerate(publishers)))
            await until(lambda: all(len(e.applied) == 600 for e in edges.values()))
    finally:
        for client in publisher_clients:
            await client.aclose()
    for edge in edges.values():
        assert edge.seqs == list(range(1, 601))
        assert edge.gaps == []
    for s in subscribers:
        assert s.stats.applied == 600
        assert s.stats.last_seq == 600
        assert s.stats.gaps == s.stats.malformed == s.stats.errors == 0
        assert s.stats.lag_ms is not None
        assert 0 <= s.stats.lag_ms < 5000
        assert s.stats.caught_up


async def test_an_edge_of_a_region_skips_messages_for_other_regions_without_a_gap(
    redis: RedisClient,
) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    edge = Edge()
    async with running(subscriber(redis, "us", edge)):
        await publisher.publish(invalidations(0, 2))
        await publisher.publish([InvalidateKey("k")], regions=["eu", "ap"])
        await publisher.publish(invalidations(2, 2))
        await until(lambda: len(edge.applied) == 4)
    assert edge.seqs == [1, 2, 4, 5]
    assert edge.gaps == []


async def test_a_fresh_edge_starts_after_the_newest_entry_without_a_gap(redis: RedisClient) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    await publisher.publish(invalidations(0, 5))
    edge, cursor = Edge(), MemoryCursor()
    sub = subscriber(redis, "eu", edge, cursor)
    async with running(sub):
        # Saved at once: a restart before the first message would resume from here.
        assert cursor.cursor is not None
        assert cursor.cursor.seq == 5
        await publisher.publish(invalidations(5, 3))
        await until(lambda: len(edge.applied) == 3)
    assert edge.seqs == [6, 7, 8]
    assert edge.gaps == []
    assert sub.stats.gaps == 0


async def test_a_fresh_edge_on_an_empty_stream_reads_it_from_the_start(redis: RedisClient) -> None:
    edge, cursor = Edge(), MemoryCursor()
    async with running(subscriber(redis, "eu", edge, cursor)):
        assert cursor.cursor == Cursor("0-0", 0)
        await SyncPublisher(redis, REGIONS, time.time).publish(invalidations(0, 2))
        await until(lambda: len(edge.applied) == 2)
    assert edge.gaps == []


async def test_the_cursor_is_saved_while_running_without_a_stop(redis: RedisClient) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    edge, store = Edge(), MemoryCursor()
    sub = subscriber(redis, "eu", edge, store)
    async with running(sub):
        await publisher.publish(invalidations(0, 3))
        await until(lambda: len(edge.applied) == 3)
        await until(lambda: store.cursor == sub.position, timeout_s=1.0)
        assert store.cursor is not None
        assert store.cursor.seq == 3


async def test_a_killed_subscriber_is_resumed_without_skipping_or_repeating(
    redis: RedisClient,
) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    cursor = RedisCursor(redis, keys.edge_sync_cursor("eu-1"))
    await cursor.save(Cursor("0-0", 0))
    edge = Edge()

    async def slow_apply(envelope: Envelope) -> None:
        # Recorded first, then a pause: a cancellation lands after the effect.
        await edge.apply(envelope)
        await asyncio.sleep(0.0005)

    for n in range(20):
        await publisher.publish(invalidations(n * 50, 50))
    stop = asyncio.Event()
    first = subscriber(redis, "eu", edge, cursor, apply=slow_apply, batch=64)
    task = asyncio.create_task(first.run(stop))
    await until(lambda: len(edge.applied) >= 150)
    task.cancel()  # mid-stream, mid-batch
    with pytest.raises(asyncio.CancelledError):
        await task
    assert 150 <= len(edge.applied) < 1000
    assert first.position is not None
    assert await cursor.load() == Cursor(first.position.entry_id, edge.seqs[-1])

    second = subscriber(redis, "eu", edge, cursor, batch=64)
    async with running(second):
        await publisher.publish(invalidations(5000, 10))
        await until(lambda: len(edge.applied) >= 1010)
        await asyncio.sleep(0.1)
    assert edge.seqs == list(range(1, 1011))
    assert edge.gaps == []


async def test_a_stream_trimmed_past_a_stopped_edge_gives_one_gap_then_normal_service(
    redis: RedisClient,
) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    cursor = RedisCursor(redis, keys.edge_sync_cursor("eu-1"))
    edge = Edge()
    async with running(subscriber(redis, "eu", edge, cursor)):
        await publisher.publish(invalidations(0, 10))
        await until(lambda: len(edge.applied) == 10)
    await publisher.publish(invalidations(10, 50))  # seqs 11..60, while the edge is down
    await redis.xtrim(keys.edge_sync_stream("eu"), maxlen=5, approximate=False)  # 56..60 left

    sub = subscriber(redis, "eu", edge, cursor)
    async with running(sub):
        await until(lambda: len(edge.applied) == 15)
        await publisher.publish(invalidations(60, 2))
        await until(lambda: len(edge.applied) == 17)
    assert [g.kind for g in edge.gaps] == [GapKind.CHAIN]
    gap = edge.gaps[0]
    assert (gap.region, gap.last_seq, gap.next_seq) == ("eu", 10, 56)
    # told before anything newer was applied
    assert edge.events[10:12] == [("gap", 56), ("apply", 56)]
    assert edge.seqs == [*range(1, 11), *range(56, 63)]
    assert sub.stats.gaps == 1


async def test_a_stream_trimmed_under_a_running_edge_is_noticed(redis: RedisClient) -> None:
    publisher = SyncPublisher(redis, ["eu"], time.time, maxlen=100)
    edge = Edge()
    gate = asyncio.Event()

    async def stalled_apply(envelope: Envelope) -> None:
        await gate.wait()
        await edge.apply(envelope)

    async with running(subscriber(redis, "eu", edge, apply=stalled_apply, batch=10)):
        await publisher.publish(invalidations(0, 1))
        await asyncio.sleep(0.1)  # the edge holds seq 1, stalled
        for n in range(10):
            await publisher.publish(invalidations(1 + n * 100, 100))
        gate.set()
        await until(lambda: edge.seqs[-1:] == [1001])
    assert [(g.kind, g.last_seq) for g in edge.gaps] == [(GapKind.CHAIN, 1)]
    assert edge.seqs[0] == 1
    assert edge.gaps[0].next_seq == edge.seqs[1] > 800  # MAXLEN left the last 100 to 200
    assert edge.seqs[1:] == list(range(edge.seqs[1], 1002))


async def test_a_lost_stream_is_a_gap_and_the_new_stream_is_read_from_its_start(
    redis: RedisClient,
) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    cursor = MemoryCursor()
    edge = Edge()
    async with running(subscriber(redis, "eu", edge, cursor)):
        await publisher.publish(invalidations(0, 3))
        await until(lambda: len(edge.applied) == 3)
    # The origin's Redis comes back empty (edge cursors live elsewhere).
    await redis.flushall()
    sub = subscriber(redis, "eu", edge, cursor)
    async with running(sub):
        await until(lambda: len(edge.gaps) == 1)
        assert edge.gaps[0].kind is GapKind.LOST
        await publisher.publish(invalidations(3, 2))  # sequence restarts at 1
        await until(lambda: len(edge.applied) == 5)
    assert edge.seqs == [1, 2, 3, 1, 2]
    assert len(edge.gaps) == 1


async def test_malformed_entries_are_counted_and_skipped(redis: RedisClient) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    stream = keys.edge_sync_stream("eu")
    edge = Edge()
    sub = subscriber(redis, "eu", edge)
    async with running(sub):
        await publisher.publish(invalidations(0, 2))
        await redis.xadd(stream, {"hello": "world"})
        await redis.xadd(stream, {"s": "3", "p": "2", "t": "1", "m": b"\xc1\xc1"})
        await redis.xadd(stream, {"m": b"garbage"})
        await publisher.publish(invalidations(2, 2))
        await until(lambda: len(edge.applied) == 4)
    assert edge.seqs == [1, 2, 3, 4]
    assert sub.stats.malformed == 3
    assert edge.gaps == []  # none of them was part of the origin's chain


async def test_an_unreadable_message_of_the_chain_is_reported_as_a_gap(redis: RedisClient) -> None:
    publisher = SyncPublisher(redis, ["eu"], time.time)
    newer_origin = redis.register_script(PUBLISH)
    edge = Edge()
    sub = subscriber(redis, "eu", edge)
    async with running(sub):
        await publisher.publish(invalidations(0, 1))
        body = b"\x82\xa1v\x01\xa4type\xa9new_thing"  # a message type this edge does not know
        script_keys = [keys.EDGE_SYNC_SEQ, keys.edge_sync_stream("eu"), keys.edge_sync_last("eu")]
        await newer_origin(keys=script_keys, args=[1000, 1, body])
        await publisher.publish(invalidations(1, 1))
        await until(lambda: len(edge.applied) == 2)
    assert edge.seqs == [1, 3]
    assert sub.stats.malformed == 1
    assert [(g.kind, g.last_seq, g.next_seq) for g in edge.gaps] == [(GapKind.CHAIN, 1, 3)]


async def test_a_failing_apply_is_reported_as_a_gap_and_passed(redis: RedisClient) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    edge = Edge()

    async def picky_apply(envelope: Envelope) -> None:
        if envelope.seq == 2:
            raise KeyError("a bug in the edge")
        await edge.apply(envelope)

    sub = subscriber(redis, "eu", edge, apply=picky_apply)
    async with running(sub):
        await publisher.publish(invalidations(0, 3))
        await until(lambda: len(edge.applied) == 2)
    assert edge.seqs == [1, 3]
    assert [(g.kind, g.next_seq) for g in edge.gaps] == [(GapKind.UNAPPLIED, 2)]
    assert sub.stats.apply_failures == 1


async def test_a_redis_error_in_apply_is_waited_out_and_the_message_applied_again(
    redis: RedisClient,
) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    edge = Edge()
    failures = [RedisConnectionError("the edge's store is restarting")]

    async def flaky_apply(envelope: Envelope) -> None:
        if envelope.seq == 2 and failures:
            raise failures.pop()
        await edge.apply(envelope)

    sub = subscriber(redis, "eu", edge, apply=flaky_apply)
    async with running(sub):
        await publisher.publish(invalidations(0, 3))
        await until(lambda: len(edge.applied) == 3)
    assert edge.seqs == [1, 2, 3]
    assert edge.gaps == []
    assert (sub.stats.errors, sub.stats.reconnects, sub.stats.apply_failures) == (1, 1, 0)


async def test_an_unreadable_cursor_is_a_gap_then_a_fresh_start(redis: RedisClient) -> None:
    publisher = SyncPublisher(redis, REGIONS, time.time)
    await publisher.publish(invalidations(0, 3))
    key = keys.edge_sync_cursor("eu-1")
    await redis.set(key, "not a cursor")
    edge = Edge()
    async with running(subscriber(redis, "eu", edge, RedisCursor(redis, key))):
        await publisher.publish(invalidations(3, 1))
        await until(lambda: len(edge.applied) == 1)
    assert [g.kind for g in edge.gaps] == [GapKind.CURSOR]
    assert edge.seqs == [4]
    assert await RedisCursor(redis, key).load() is not None


async def test_a_restarted_redis_under_a_running_edge_is_reconnected_to(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis", persistent=True).start()
    # No retries inside the client: every failure reaches the subscriber's own loop.
    edge_client = connect(server.url, retry=Retry(NoBackoff(), 0))
    origin_client = connect(server.url)
    publisher = SyncPublisher(origin_client, REGIONS, time.time)
    edge = Edge()
    sub = subscriber(edge_client, "eu", edge, RedisCursor(edge_client, keys.edge_sync_cursor("e")))
    try:
        async with running(sub):
            await publisher.publish(invalidations(0, 5))
            await until(lambda: len(edge.applied) == 5)
            port = server.port
            server.stop()
            await until(lambda: sub.stats.errors >= 2)  # cut off: backing off, not crashing
            server.start()
            assert server.port == port
            try:
                await publisher.publish(invalidations(5, 5))
            except PublishFailed:  # its pooled connection died with the old server
                await publisher.publish(invalidations(5, 5))
            await until(lambda: len(edge.applied) == 10)
        assert edge.seqs == list(range(1, 11))
        assert edge.gaps == []  # the stream survived (append-only file)
        assert sub.stats.reconnects >= 1
    finally:
        await edge_client.aclose()
        await origin_client.aclose()
        server.stop()


async def test_behind_ms_measures_stream_time_left_to_read(redis: RedisClient) -> None:
    publisher = SyncPublisher(redis, ["eu"], time.time)
    edge = Edge()
    sub = subscriber(redis, "eu", edge)
    async with running(sub):
        await publisher.publish(invalidations(0, 1))
        await until(lambda: len(edge.applied) == 1)
        assert await sub.behind_ms() == 0
    stopped = subscriber(redis, "eu", Edge(), MemoryCursor(Cursor("0-0", 0)))
    await stopped.start()
    await asyncio.sleep(0.05)
    await publisher.publish(invalidations(1, 1))
    assert 40 <= await stopped.behind_ms() < 5000
