from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import numpy as np
from redis.asyncio import Redis

from origin.embedding_batch import Outcome
from origin.embedding_state import WorkerState, decode_state, encode_state, state_version
from origin.embedding_worker import EmbeddingWorker
from origin.event_streams import ensure_groups, trim_acknowledged
from origin.feedback import FeedbackLog
from origin.freshness_tiers import FreshnessPolicy
from perso.worker_status import report
from protocol import keys
from protocol.api import FeedbackRequest
from protocol.events import FeedbackEvent, encode_event
from protocol.vectors import pack_vector, unpack_vector
from tests.fakes import FakeClock

DIM = 8
PARTITIONS = 2
NOW = 1_767_225_600.0


def worker(
    redis: Redis, consumer: str = "w-1", kind: type[EmbeddingWorker] = EmbeddingWorker
) -> EmbeddingWorker:
    return kind(
        redis,
        partitions=PARTITIONS,
        dim=DIM,
        consumer=consumer,
        clock=FakeClock(now=NOW),
        block_ms=50,
    )


async def add_items(redis: Redis, n: int = 5) -> np.ndarray:
    vectors = np.eye(n, DIM, dtype=np.float32)
    for i in range(n):
        await redis.set(keys.item_vector(f"it-{i}"), pack_vector(vectors[i]))
    return vectors


def event(n: int, *, user: str = "u-1", item: str = "it-1", action: str = "click") -> FeedbackEvent:
    ms = int(NOW * 1000)
    return FeedbackEvent(f"ix-{n}", user, item, action, timestamp_ms=ms, accepted_ms=ms)


async def append(redis: Redis, *events: FeedbackEvent) -> None:
    """Append directly, bypassing the intake's dedup, as a redelivery would look."""
    for e in events:
        stream = keys.events_stream(keys.partition_of(e.user_id, PARTITIONS))
        await redis.xadd(stream, {"e": encode_event(e)})


async def until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


async def drain(w: EmbeddingWorker) -> None:
    while await w.poll(">") > 0:
        pass


async def version(redis: Redis, user: str) -> int:
    return state_version(await redis.get(keys.user_state(user)))


async def pending(redis: Redis) -> int:
    total = 0
    for stream in keys.events_streams(PARTITIONS):
        total += (await redis.xpending(stream, keys.EMBEDDER_GROUP))["pending"]
    return total


async def test_an_accepted_click_becomes_an_embedding(redis: Redis) -> None:
    vectors = await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    log = FeedbackLog(redis, partitions=PARTITIONS, dedup_ttl_s=60, clock=FakeClock(now=NOW))
    await log.record(
        FeedbackRequest.model_validate(
            {"user_id": "u-1", "feedback": [{"item_id": "it-2", "action": "click"}]}
        )
    )
    w = worker(redis)
    await drain(w)
    assert w.outcomes[Outcome.APPLIED] == 1
    raw = await redis.get(keys.user_embedding("u-1"))
    assert raw is not None
    assert np.allclose(unpack_vector(raw, DIM), vectors[2])
    assert await version(redis, "u-1") == 1
    state = decode_state(await redis.get(keys.user_state("u-1")), DIM)
    assert state.momentum is not None
    assert len(state.window) == 1
    assert await pending(redis) == 0


async def test_a_redelivered_event_is_applied_once(redis: Redis) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    await append(redis, event(1), event(1), event(2, item="it-3"))
    w = worker(redis)
    await drain(w)
    assert w.outcomes == {Outcome.APPLIED: 2, Outcome.DUPLICATE: 1}
    assert await version(redis, "u-1") == 2


async def test_two_workers_racing_on_one_user_lose_no_update(redis: Redis) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    n = 200
    await append(redis, *(event(i, item=f"it-{i % 5}", action="view") for i in range(n)))
    a, b = worker(redis, "w-a"), worker(redis, "w-b")
    await asyncio.gather(drain(a), drain(b))
    assert a.outcomes[Outcome.APPLIED] + b.outcomes[Outcome.APPLIED] == n
    assert a.outcomes[Outcome.APPLIED] > 0
    assert b.outcomes[Outcome.APPLIED] > 0
    assert await version(redis, "u-1") == n
    assert await pending(redis) == 0


async def test_concurrent_applies_to_one_user_all_count(redis: Redis) -> None:
    await add_items(redis)
    workers = [worker(redis, f"w-{n}") for n in range(8)]
    await asyncio.gather(
        *(workers[i % 8].process([event(i, item=f"it-{i % 5}")]) for i in range(40))
    )
    assert sum(w.outcomes[Outcome.APPLIED] for w in workers) == 40
    assert await version(redis, "u-1") == 40


async def test_entries_it_cannot_apply_are_acknowledged_and_counted(redis: Redis) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    garbage_id = await redis.xadd(keys.events_stream(0), {"e": b"\x00garbage"})
    await append(
        redis,
        event(1, item="not-in-catalog"),
        event(2, user="u-new", action="dismiss"),  # nothing to move yet
    )
    w = worker(redis)
    await drain(w)
    assert w.outcomes == {Outcome.MALFORMED: 1, Outcome.UNKNOWN_ITEM: 1, Outcome.NO_CHANGE: 1}
    assert await pending(redis) == 0
    assert await redis.get(keys.user_embedding("u-new")) is None
    # the malformed entry is parked, not lost
    [(_, parked)] = await redis.xrange(keys.dead_letters(0))
    assert parked[b"entry"] == garbage_id
    assert parked[b"e"] == b"\x00garbage"
    assert b"not msgpack" in parked[b"reason"]


class FaultyWorker(EmbeddingWorker):
    """Injects a fault (a bug) into applying events of one item."""

    async def process(
        self, events: Sequence[FeedbackEvent], *, hold: bool = False
    ) -> dict[str, float]:
        if any(event.item_id == "it-4" for event in events):
            raise ZeroDivisionError("injected")
        return await super().process(events, hold=hold)


async def test_an_entry_whose_application_fails_is_parked_and_the_rest_go_on(
    redis: Redis,
) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    await append(redis, event(1, item="it-4"), event(2, item="it-2"))
    w = worker(redis, kind=FaultyWorker)
    await drain(w)
    assert w.outcomes == {Outcome.FAILED: 1, Outcome.APPLIED: 1}
    assert await pending(redis) == 0
    partition = keys.partition_of("u-1", PARTITIONS)
    [(_, parked)] = await redis.xrange(keys.dead_letters(partition))
    assert b"ZeroDivisionError" in parked[b"reason"]


async def test_an_embedding_of_another_dimension_is_replaced(redis: Redis) -> None:
    vectors = await add_items(redis)
    await redis.set(keys.user_embedding("u-1"), pack_vector(np.ones(DIM * 2)))
    await redis.set(keys.user_state("u-1"), encode_state(WorkerState(version=4), DIM))
    w = worker(redis)
    await w.process([event(1, item="it-3")])
    assert w.outcomes[Outcome.APPLIED] == 1
    raw = await redis.get(keys.user_embedding("u-1"))
    assert raw is not None
    assert np.allclose(unpack_vector(raw, DIM), vectors[3])
    assert await version(redis, "u-1") == 5


async def test_the_worker_recovers_when_its_consumer_groups_vanish(redis: Redis) -> None:
    await add_items(redis)
    stop = asyncio.Event()
    w = worker(redis)
    task = asyncio.create_task(w.run(stop))
    await append(redis, event(1))
    await until(lambda: w.outcomes[Outcome.APPLIED] == 1)
    await redis.flushall()  # groups, streams and the catalog copy are gone
    await add_items(redis)
    await append(redis, event(2, item="it-2"))
    await until(lambda: w.outcomes[Outcome.APPLIED] == 2)
    stop.set()
    await asyncio.wait_for(task, 5.0)


async def test_a_restarted_worker_applies_what_it_had_read_but_not_acknowledged(
    redis: Redis,
) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    await append(redis, event(1), event(2, item="it-2"))
    # The worker "w-1" read both entries, then died before applying them.
    streams = dict.fromkeys(keys.events_streams(PARTITIONS), ">")
    await redis.xreadgroup(keys.EMBEDDER_GROUP, "w-1", streams, count=10)
    assert await pending(redis) == 2
    restarted = worker(redis, "w-1")
    await restarted.drain_own_pending()
    assert restarted.outcomes[Outcome.APPLIED] == 2
    assert await pending(redis) == 0
    assert await version(redis, "u-1") == 2


async def test_events_appended_before_any_worker_ran_are_delivered(redis: Redis) -> None:
    await add_items(redis)
    await append(redis, event(1))  # the stream exists before its consumer group
    await ensure_groups(redis, PARTITIONS)
    w = worker(redis)
    await drain(w)
    assert w.outcomes[Outcome.APPLIED] == 1


async def test_run_stops_when_asked(redis: Redis) -> None:
    await add_items(redis)
    stop = asyncio.Event()
    w = worker(redis)
    task = asyncio.create_task(w.run(stop))
    await append(redis, event(1))
    await until(lambda: w.outcomes[Outcome.APPLIED] == 1)
    stop.set()
    await asyncio.wait_for(task, 2.0)
    assert w.outcomes[Outcome.APPLIED] == 1


async def test_trimming_keeps_every_unacknowledged_entry(redis: Redis) -> None:
    await ensure_groups(redis, PARTITIONS)
    stream = keys.events_stream(0)
    ids = [await redis.xadd(stream, {"e": b"x"}) for _ in range(10)]
    # consumer "a" read five entries and acknowledged the first three
    await redis.xreadgroup(keys.EMBEDDER_GROUP, "a", {stream: ">"}, count=5)
    await redis.xack(stream, keys.EMBEDDER_GROUP, *ids[:3])
    assert await trim_acknowledged(redis, stream) == 3
    remaining = [entry_id for entry_id, _ in await redis.xrange(stream)]
    assert remaining == ids[3:]
    # all read and acknowledged: only the last delivered entry is kept
    await redis.xreadgroup(keys.EMBEDDER_GROUP, "a", {stream: ">"}, count=10)
    await redis.xack(stream, keys.EMBEDDER_GROUP, *ids[3:])
    await trim_acknowledged(redis, stream)
    assert [entry_id for entry_id, _ in await redis.xrange(stream)] == ids[-1:]


async def test_a_worker_reclaims_entries_a_dead_worker_left_pending(redis: Redis) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    await append(redis, *(event(i, user=f"u-{i % 3}", item=f"it-{i % 5}") for i in range(9)))
    # "dead" read every entry, applied none and died
    streams = dict.fromkeys(keys.events_streams(PARTITIONS), ">")
    await redis.xreadgroup(keys.EMBEDDER_GROUP, "dead", streams, count=100)
    assert await pending(redis) == 9
    survivor = EmbeddingWorker(
        redis,
        partitions=PARTITIONS,
        dim=DIM,
        consumer="survivor",
        clock=FakeClock(now=NOW),
        claim_idle_ms=100,
    )
    await asyncio.sleep(0.15)
    assert await survivor.reclaim() == 9
    assert await pending(redis) == 0
    assert sum([await version(redis, f"u-{u}") for u in range(3)]) == 9
    # reclaiming again finds nothing, and replaying the same events changes nothing
    assert await survivor.reclaim() == 0
    await append(redis, *(event(i, user=f"u-{i % 3}", item=f"it-{i % 5}") for i in range(9)))
    await drain(survivor)
    assert sum([await version(redis, f"u-{u}") for u in range(3)]) == 9
    assert survivor.outcomes[Outcome.DUPLICATE] == 9


async def test_the_worker_publishes_its_figures(redis: Redis) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    await append(redis, event(1), event(2, item="it-2"))
    w = worker(redis)
    await drain(w)
    await w.upkeep()
    stats = await redis.hgetall(keys.worker_stats("w-1"))
    assert stats[b"applied"] == b"2"
    assert int(stats[b"lag_ms"]) == 0
    assert await redis.ttl(keys.worker_stats("w-1")) > 0


async def test_tiers_hold_active_and_casual_users_and_apply_power_users_at_once(
    redis: Redis,
) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    clock = FakeClock(now=NOW)
    w = EmbeddingWorker(
        redis,
        partitions=PARTITIONS,
        dim=DIM,
        consumer="tiered",
        clock=clock,
        block_ms=50,
        freshness=FreshnessPolicy(active_delay_s=300, casual_delay_s=3600),
    )
    # power: 12 interactions today (the batch counts); casual: 1; active: 4
    await append(
        redis,
        *(event(i, user="power", item=f"it-{i % 5}") for i in range(12)),
        event(100, user="casual"),
        *(event(200 + i, user="active", item=f"it-{i}") for i in range(4)),
    )
    await drain(w)
    assert await version(redis, "power") == 12
    assert await version(redis, "casual") == 0
    assert await version(redis, "active") == 0
    assert w.held == 5
    assert await pending(redis) == 5  # held entries stay pending: a crash loses nothing
    # a later interaction of a held user queues behind what is held
    await append(redis, event(300, user="casual", item="it-2"))
    await drain(w)
    assert w.held == 6
    clock.tick(301)
    await drain(w)
    assert await version(redis, "active") == 4
    assert await version(redis, "casual") == 0
    clock.tick(3600)
    await drain(w)
    assert await version(redis, "casual") == 2
    assert w.held == 0
    assert await pending(redis) == 0
    await w.upkeep()  # nothing held: nothing to renew


async def test_held_entries_are_not_reclaimed_while_their_worker_lives(redis: Redis) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    holder = EmbeddingWorker(
        redis,
        partitions=PARTITIONS,
        dim=DIM,
        consumer="holder",
        clock=FakeClock(now=NOW),
        block_ms=50,
        claim_idle_ms=100,
        freshness=FreshnessPolicy(active_delay_s=300, casual_delay_s=3600),
    )
    await append(redis, event(1, user="casual"))
    await drain(holder)
    assert holder.held == 1
    other = worker(redis, "other")
    await asyncio.sleep(0.15)
    await holder.upkeep()  # renews the claim
    assert await other.reclaim() == 0


async def test_the_status_report_shows_streams_and_workers(redis: Redis) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    log = FeedbackLog(redis, partitions=PARTITIONS, dedup_ttl_s=60, clock=FakeClock(now=NOW))
    await log.append("u-1", [event(1), event(2, item="it-2")])
    w = worker(redis, "w-status")
    await drain(w)
    await w.upkeep()
    text = await report(redis, PARTITIONS)
    stream = keys.events_stream(keys.partition_of("u-1", PARTITIONS))
    [row] = [line for line in text.splitlines() if line.startswith(stream)]
    assert row.split()[1:4] == ["2", "1", "0"]  # accepted, kept after trimming, pending
    [worker_row] = [line for line in text.splitlines() if line.startswith("w-status")]
    assert worker_row.split()[1] == "2"  # applied


async def test_a_restarted_worker_takes_back_what_it_held_and_does_not_loop(
    redis: Redis,
) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    tiers = FreshnessPolicy(active_delay_s=300, casual_delay_s=3600)

    def tiered(clock: FakeClock) -> EmbeddingWorker:
        return EmbeddingWorker(
            redis,
            partitions=PARTITIONS,
            dim=DIM,
            consumer="same-name",
            clock=clock,
            block_ms=50,
            freshness=tiers,
        )

    await append(redis, event(1, user="casual"), event(2, user="casual", item="it-2"))
    first = tiered(FakeClock(now=NOW))
    await drain(first)
    assert first.held == 2
    # the process restarts: a new worker of the same name finds its pending entries
    clock = FakeClock(now=NOW)
    restarted = tiered(clock)
    assert await asyncio.wait_for(restarted.drain_own_pending(), 5.0) == 2
    assert restarted.held == 2
    clock.tick(3601)
    await drain(restarted)
    assert await version(redis, "casual") == 2
    assert await pending(redis) == 0
