"""Reading the worker's streams partition by partition (``origin.worker.partition_reads``):
one read per partition's slot, a bounded hand-over while a worker runs, and nothing read
left unapplied by a worker that stops on request."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from redis.cluster import key_slot

from origin.event_streams.streams import ensure_groups
from origin.worker.consumer import StreamWorker
from origin.worker.partition_reads import PartitionReaders, partition_streams, read_now
from protocol import keys
from protocol.decisions import DECISION_FIELD
from protocol.events import EVENT_FIELD, FeedbackEvent, encode_event
from protocol.vectors import pack_vector
from redis_client.client import RedisClient, is_cluster_client
from redis_client.durable import Durability, NotReplicated
from tests.fakes import FakeClock

pytestmark = pytest.mark.cluster

PARTITIONS = 8
NOW = 1_767_225_600.0
DIM = 8


def fields() -> dict[str, bytes]:
    out = {}
    for p in range(PARTITIONS):
        events, decisions = partition_streams(p)
        out[events], out[decisions] = EVENT_FIELD, DECISION_FIELD
    return out


def click(n: int, user: str) -> FeedbackEvent:
    ms = int(NOW * 1000)
    return FeedbackEvent(f"ix-{n}", user, "it-1", "click", timestamp_ms=ms, accepted_ms=ms)


async def append(redis: RedisClient, event: FeedbackEvent) -> int:
    partition = keys.partition_of(event.user_id, PARTITIONS)
    await redis.xadd(keys.events_stream(partition), {EVENT_FIELD: encode_event(event)})
    return partition


async def pending(redis: RedisClient) -> int:
    total = 0
    for stream in [*keys.events_streams(PARTITIONS), *keys.decisions_streams(PARTITIONS)]:
        total += (await redis.xpending(stream, keys.WORKER_GROUP))["pending"]
    return total


async def until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


def test_a_partitions_two_streams_share_its_slot() -> None:
    for p in range(PARTITIONS):
        events, decisions = partition_streams(p)
        assert key_slot(events.encode()) == key_slot(decisions.encode())


async def test_read_now_reads_every_partition_in_one_pass(redis: RedisClient) -> None:
    await ensure_groups(redis, PARTITIONS)
    partitions = {await append(redis, click(n, f"u-{n}")) for n in range(40)}
    assert len(partitions) > 3  # the users spread over the partitions
    streams = fields()
    partition_of = {s: p for p in range(PARTITIONS) for s in partition_streams(p)}
    entries = await read_now(
        redis,
        "w-1",
        dict.fromkeys(streams, ">"),
        count=100,
        field_of=streams,
        partition_of=partition_of,
    )
    assert len(entries) == 40
    assert {e.stream for e in entries} == {keys.events_stream(p) for p in partitions}
    assert all(e.raw for e in entries)


async def test_readers_hand_over_no_more_than_the_queue_holds(redis: RedisClient) -> None:
    await ensure_groups(redis, PARTITIONS)
    user = "u-backlog"
    for n in range(10):
        await append(redis, click(n, user))
    partition = keys.partition_of(user, PARTITIONS)
    readers = PartitionReaders(redis, "w-1", [partition], count=1, block_ms=50, field_of=fields())
    stop = asyncio.Event()
    task = asyncio.create_task(readers.run(stop))
    await asyncio.sleep(0.3)
    # Two reads queued, a third waiting for room: the other seven are still undelivered.
    assert await pending(redis) == 3
    taken = await readers.take(1.0, at_most=10)
    assert 2 <= len(taken) <= 3  # the queued reads, and the waiting one if it got in
    stop.set()
    rest = []
    while not task.done():
        rest += await readers.take(0.05, at_most=10)
    rest += readers.take_ready()
    await task
    assert len(taken) + len(rest) == await pending(redis)


async def test_a_running_worker_applies_every_partition_and_stops_leaving_nothing_read(
    redis: RedisClient,
) -> None:
    for i in range(3):
        await redis.set(keys.item_vector(f"it-{i}"), pack_vector([1.0] + [0.0] * (DIM - 1)))
    w = StreamWorker(
        redis,
        partitions=PARTITIONS,
        dim=DIM,
        consumer="w-1",
        clock=FakeClock(now=NOW),
        block_ms=50,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(w.run(stop))
    users = [f"u-{n}" for n in range(24)]
    for n, user in enumerate(users):
        await append(redis, click(n, user))
    await until(lambda: w.stats.entries >= len(users))
    for n, user in enumerate(users):  # a burst just before the stop
        await append(redis, click(100 + n, user))
    stop.set()
    await asyncio.wait_for(task, 5.0)
    # Whatever the readers had read was applied and acknowledged before run returned.
    assert await pending(redis) == 0
    for user in users:
        assert await redis.exists(keys.user_record(user))


async def test_a_batch_is_acknowledged_only_past_a_replication_barrier(
    redis: RedisClient,
) -> None:
    """On the cluster tier every primary's replica confirms the barrier and the batch is
    acknowledged; on one node, with no replica, the worker keeps the batch pending (a
    back-off, as after any Redis failure) rather than acknowledge what could be lost."""
    await redis.set(keys.item_vector("it-1"), pack_vector([1.0] + [0.0] * (DIM - 1)))
    w = StreamWorker(
        redis,
        partitions=PARTITIONS,
        dim=DIM,
        consumer="w-1",
        clock=FakeClock(now=NOW),
        block_ms=50,
        durability=Durability(replicas=1, timeout_ms=300 if is_cluster_client(redis) else 20),
    )
    await ensure_groups(redis, PARTITIONS)
    await append(redis, click(1, "u-1"))
    if is_cluster_client(redis):
        assert await w.poll(">") == 1
        assert await pending(redis) == 0
    else:
        with pytest.raises(NotReplicated):
            await w.poll(">")
        assert await pending(redis) == 1
    assert await redis.exists(keys.user_record("u-1"))


async def test_a_running_worker_backs_off_while_no_replica_confirms(redis: RedisClient) -> None:
    if is_cluster_client(redis):
        pytest.skip("every primary of the test cluster has a replica")
    await redis.set(keys.item_vector("it-1"), pack_vector([1.0] + [0.0] * (DIM - 1)))
    w = StreamWorker(
        redis,
        partitions=PARTITIONS,
        dim=DIM,
        consumer="w-1",
        clock=FakeClock(now=NOW),
        block_ms=50,
        durability=Durability(replicas=1, timeout_ms=20),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(w.run(stop))
    await append(redis, click(1, "u-1"))
    await until(lambda: w.stats.batches >= 2)  # tried, backed off, tried again
    assert not task.done()
    assert await pending(redis) == 1  # never acknowledged
    stop.set()
    await asyncio.wait_for(task, 5.0)
