"""The stream worker (``origin.worker.consumer``) against the real Redis: feedback events in,
users' models out (``u:{id}:st``, ``origin.learned.user_models``), exactly once in effect.

A user's record counts what was applied to it: its window holds the hash of every
observation applied (the last ``WINDOW``), so "applied exactly once" is "each interaction's
hash is in the window, once"; its version counts the writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from redis.exceptions import RedisError

from origin.event_streams.event_log import FeedbackLog
from origin.event_streams.streams import ensure_groups
from origin.learned.population import PopulationStore
from origin.learned.user_models import (
    UserRecord,
    decode_record,
    encode_record,
    observation_hash,
)
from origin.worker.batch import Outcome
from origin.worker.consumer import StreamWorker
from origin.worker.freshness_tiers import FreshnessPolicy
from origin.worker.totals import TOTALLED, WorkerTotals
from perso.worker_status import ALL_WORKERS, LIVE_HEADING, TOTALS_HEADING, report, totals, workers
from protocol import keys
from protocol.api import FeedbackRequest
from protocol.decisions import DECISION_FIELD, Decision, Shown, encode_decision
from protocol.events import EVENT_FIELD, FeedbackEvent, encode_event
from protocol.vectors import pack_vector
from redis_client.client import RedisClient, node_of, open_client
from relevance.population import for_ranking, under
from relevance.user_model import UserModel
from tests.fakes import FakeClock

DIM = 8
PARTITIONS = 2
NOW = 1_767_225_600.0
# The seed's tiers as the steady state (overload_lag_s 0): every test here holds.
TIERS = FreshnessPolicy(active_delay_s=300, casual_delay_s=3600, overload_lag_s=0)

pytestmark = pytest.mark.cluster


def worker(
    redis: RedisClient,
    consumer: str = "w-1",
    kind: type[StreamWorker] = StreamWorker,
    **options: object,
) -> StreamWorker:
    settings: dict[str, object] = {"clock": FakeClock(now=NOW), "block_ms": 50, **options}
    return kind(
        redis,
        partitions=PARTITIONS,
        dim=DIM,
        consumer=consumer,
        **settings,  # type: ignore[arg-type]
    )


async def add_items(redis: RedisClient, n: int = 5) -> np.ndarray:
    """Items ``it-0`` .. ``it-<n-1>``, each along its own axis."""
    vectors = np.eye(n, DIM, dtype=np.float32)
    for i in range(n):
        await redis.set(keys.item_vector(f"it-{i}"), pack_vector(vectors[i]))
    return vectors


def event(n: int, *, user: str = "u-1", item: str = "it-1", action: str = "click") -> FeedbackEvent:
    ms = int(NOW * 1000)
    return FeedbackEvent(f"ix-{n}", user, item, action, timestamp_ms=ms, accepted_ms=ms)


async def append(redis: RedisClient, *events: FeedbackEvent) -> None:
    """Append directly, bypassing the intake's dedup, as a redelivery would look."""
    for e in events:
        stream = keys.events_stream(keys.partition_of(e.user_id, PARTITIONS))
        await redis.xadd(stream, {EVENT_FIELD: encode_event(e)})


async def until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


async def read_as(redis: RedisClient, consumer: str, streams: dict[str, str], count: int) -> None:
    """Read ``streams`` as ``consumer`` would (then die holding them), one stream at a time:
    a cluster takes one slot per read."""
    for stream, position in streams.items():
        await redis.xreadgroup(keys.WORKER_GROUP, consumer, {stream: position}, count=count)


async def drain(w: StreamWorker) -> None:
    while await w.poll(">") > 0:
        pass


def outcomes(w: StreamWorker) -> dict[Outcome, int]:
    """The worker's outcomes that happened."""
    return {outcome: n for outcome, n in w.outcomes.items() if n}


async def record(redis: RedisClient, user: str) -> UserRecord:
    return decode_record(await redis.get(keys.user_record(user)), DIM)


async def version(redis: RedisClient, user: str) -> int:
    return (await record(redis, user)).version


async def applied(redis: RedisClient, user: str) -> list[int]:
    """The observations applied to the user, as hashes, sorted."""
    return sorted((await record(redis, user)).window)


def hashes(*ns: int) -> list[int]:
    return sorted(observation_hash(f"ix-{n}") for n in ns)


async def pending(redis: RedisClient) -> int:
    total = 0
    for stream in [*keys.events_streams(PARTITIONS), *keys.decisions_streams(PARTITIONS)]:
        total += (await redis.xpending(stream, keys.WORKER_GROUP))["pending"]
    return total


def users_of_partition(partition: int, count: int) -> list[str]:
    users = (f"u-{n}" for n in range(1000))
    return [u for u in users if keys.partition_of(u, PARTITIONS) == partition][:count]


async def test_an_accepted_click_becomes_the_users_model(redis: RedisClient) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    log = FeedbackLog(redis, partitions=PARTITIONS, dedup_ttl_s=60, clock=FakeClock(now=NOW))
    await log.record(
        FeedbackRequest.model_validate(
            {
                "user_id": "u-1",
                "feedback": [{"item_id": "it-2", "action": "click", "interaction_id": "ix-1"}],
            }
        )
    )
    w = worker(redis)
    await drain(w)
    assert outcomes(w) == {Outcome.APPLIED: 1}
    state = await record(redis, "u-1")
    assert state.version == 1
    assert state.window == (observation_hash("ix-1"),)
    assert state.updated_ms == int(NOW * 1000)
    assert state.interactions_today(int(NOW)) == 1
    assert state.model is not None
    # the click moved the user toward the item, along the item's axis alone
    assert np.flatnonzero(state.model.mean).tolist() == [2]
    assert state.model.mean[2] > 0
    prior = UserModel.prior(DIM)
    assert state.model.var[2] < prior.var[2]
    assert np.delete(state.model.var, 2) == pytest.approx(np.delete(prior.var, 2), rel=1e-3)
    # one key holds the user: no separate embedding
    stored = [name async for name in redis.scan_iter(match="u:{u-1}:*")]
    assert stored == [keys.user_record("u-1").encode()]
    assert await pending(redis) == 0


async def test_a_redelivered_event_is_applied_once(redis: RedisClient) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    await append(redis, event(1), event(1), event(2, item="it-3"))  # one batch
    w = worker(redis)
    await drain(w)
    assert outcomes(w) == {Outcome.APPLIED: 2, Outcome.DUPLICATE: 1}
    assert await applied(redis, "u-1") == hashes(1, 2)
    assert await version(redis, "u-1") == 1  # one batch, one write
    await append(redis, event(1))  # again, in a later batch
    await drain(w)
    assert outcomes(w) == {Outcome.APPLIED: 2, Outcome.DUPLICATE: 2}
    assert await version(redis, "u-1") == 1  # nothing applied, nothing written


async def test_views_teach_nothing_and_a_dismiss_pushes_the_user_away(redis: RedisClient) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    await append(redis, event(1, user="u-new", action="view"))
    w = worker(redis)
    await drain(w)
    assert outcomes(w) == {Outcome.NO_CHANGE: 1}
    assert await redis.get(keys.user_record("u-new")) is None
    await append(redis, event(2, user="u-new", item="it-3", action="dismiss"))
    await drain(w)
    state = await record(redis, "u-new")
    assert state.model is not None
    assert np.flatnonzero(state.model.mean).tolist() == [3]
    assert state.model.mean[3] < 0


async def test_two_workers_racing_on_the_same_users_lose_no_update(redis: RedisClient) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    users = users_of_partition(0, 4)
    per_user = 40  # within the window: every applied observation stays visible
    n = len(users) * per_user
    await append(
        redis, *(event(i, user=users[i % len(users)], item=f"it-{i % 5}") for i in range(n))
    )
    a, b = worker(redis, "w-a", batch_size=10), worker(redis, "w-b", batch_size=10)
    await asyncio.gather(drain(a), drain(b))
    assert a.outcomes[Outcome.APPLIED] + b.outcomes[Outcome.APPLIED] == n
    assert a.outcomes[Outcome.APPLIED] > 0
    assert b.outcomes[Outcome.APPLIED] > 0
    assert a.outcomes[Outcome.DUPLICATE] + b.outcomes[Outcome.DUPLICATE] == 0
    for k, user in enumerate(users):
        assert await applied(redis, user) == hashes(*range(k, n, len(users)))
    assert await pending(redis) == 0


async def test_concurrent_writers_of_one_user_conflict_and_lose_nothing(redis: RedisClient) -> None:
    await add_items(redis)
    workers = [worker(redis, f"w-{n}") for n in range(8)]
    await asyncio.gather(
        *(workers[i % 8].process([event(i, item=f"it-{i % 5}")]) for i in range(40))
    )
    assert sum(w.outcomes[Outcome.APPLIED] for w in workers) == 40
    # 40 writers started from the same version: the compare-and-set turned most away,
    # and they re-read and applied on top of the winner
    assert sum(w.stats.conflicts for w in workers) > 0
    assert await applied(redis, "u-1") == hashes(*range(40))
    assert await version(redis, "u-1") == 40  # one write per observation


async def test_entries_it_cannot_apply_are_acknowledged_counted_and_parked(
    redis: RedisClient,
) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    garbage_id = await redis.xadd(keys.events_stream(0), {EVENT_FIELD: b"\x00garbage"})
    bad_decision_id = await redis.xadd(keys.decisions_stream(1), {DECISION_FIELD: b"\x93\x01"})
    await append(redis, event(1, item="not-in-catalog"), event(2, user="u-new", action="view"))
    w = worker(redis)
    await drain(w)
    assert outcomes(w) == {Outcome.MALFORMED: 2, Outcome.UNKNOWN_ITEM: 1, Outcome.NO_CHANGE: 1}
    assert await pending(redis) == 0
    assert await redis.get(keys.user_record("u-1")) is None  # nothing known was learnt
    assert await redis.get(keys.user_record("u-new")) is None
    # the malformed entries are parked, not lost
    [(_, parked)] = await redis.xrange(keys.dead_letters(0))
    assert parked[b"entry"] == garbage_id
    assert parked[b"e"] == b"\x00garbage"
    assert b"not msgpack" in parked[b"reason"]
    [(_, parked)] = await redis.xrange(keys.dead_letters(1))
    assert parked[b"entry"] == bad_decision_id
    assert b"not a decision" in parked[b"reason"]


class FaultyWorker(StreamWorker):
    """Injects a fault (a bug) into applying events of one item."""

    async def process(
        self, events: Sequence[FeedbackEvent], *, defer: bool = False
    ) -> dict[str, float]:
        if any(event.item_id == "it-4" for event in events):
            raise ZeroDivisionError("injected")
        return await super().process(events, defer=defer)


async def test_an_entry_whose_application_fails_is_parked_and_the_rest_go_on(
    redis: RedisClient,
) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    await append(redis, event(1, item="it-4"), event(2, item="it-2"))
    w = worker(redis, kind=FaultyWorker)
    await drain(w)
    assert outcomes(w) == {Outcome.FAILED: 1, Outcome.APPLIED: 1}
    assert await pending(redis) == 0
    assert await applied(redis, "u-1") == hashes(2)
    partition = keys.partition_of("u-1", PARTITIONS)
    [(_, parked)] = await redis.xrange(keys.dead_letters(partition))
    assert b"ZeroDivisionError" in parked[b"reason"]


async def test_a_model_of_another_dimension_is_replaced_keeping_version_and_window(
    redis: RedisClient,
) -> None:
    await add_items(redis)
    old = UserRecord(version=4, model=UserModel.prior(DIM * 2), window=(observation_hash("ix-0"),))
    await redis.set(keys.user_record("u-1"), encode_record(old, DIM * 2))
    w = worker(redis)
    await w.process([event(1, item="it-3"), event(0, item="it-2")])
    assert outcomes(w) == {Outcome.APPLIED: 1, Outcome.DUPLICATE: 1}
    state = await record(redis, "u-1")
    assert state.version == 5
    assert state.window == (observation_hash("ix-0"), observation_hash("ix-1"))
    assert state.model is not None
    assert state.model.dim == DIM
    assert np.flatnonzero(state.model.mean).tolist() == [3]


@pytest.mark.parametrize(
    "damaged",
    [
        encode_record(UserRecord(version=7, model=UserModel.prior(DIM)), DIM)[:-3],
        (7).to_bytes(4, "little") + b"junk",  # shorter than a header
    ],
    ids=["truncated", "short"],
)
async def test_a_damaged_record_is_started_afresh_at_its_version(
    redis: RedisClient, damaged: bytes
) -> None:
    await add_items(redis)
    await redis.set(keys.user_record("u-1"), damaged)
    w = worker(redis)
    await w.process([event(1, item="it-3")])
    state = await record(redis, "u-1")
    assert state.version == 8
    assert state.window == (observation_hash("ix-1"),)
    assert state.model is not None


async def test_the_worker_recovers_when_its_consumer_groups_vanish(redis: RedisClient) -> None:
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
    redis: RedisClient,
) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    await append(redis, event(1), event(2, item="it-2"))
    # The worker "w-1" read both entries, then died before applying them.
    streams = dict.fromkeys(keys.events_streams(PARTITIONS), ">")
    await read_as(redis, "w-1", streams, count=10)
    assert await pending(redis) == 2
    restarted = worker(redis, "w-1")
    await restarted.drain_own_pending()
    assert restarted.outcomes[Outcome.APPLIED] == 2
    assert await pending(redis) == 0
    assert await applied(redis, "u-1") == hashes(1, 2)


async def test_events_appended_before_any_worker_ran_are_delivered(redis: RedisClient) -> None:
    await add_items(redis)
    await append(redis, event(1))  # the stream exists before its consumer group
    await ensure_groups(redis, PARTITIONS)
    w = worker(redis)
    await drain(w)
    assert w.outcomes[Outcome.APPLIED] == 1


async def test_run_stops_when_asked(redis: RedisClient) -> None:
    await add_items(redis)
    stop = asyncio.Event()
    w = worker(redis)
    task = asyncio.create_task(w.run(stop))
    await append(redis, event(1))
    await until(lambda: w.outcomes[Outcome.APPLIED] == 1)
    stop.set()
    await asyncio.wait_for(task, 2.0)
    assert w.outcomes[Outcome.APPLIED] == 1


async def test_a_worker_reclaims_entries_a_dead_worker_left_pending(redis: RedisClient) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    await append(redis, *(event(i, user=f"u-{i % 3}", item=f"it-{i % 5}") for i in range(9)))
    # "dead" read every entry, applied none and died
    streams = dict.fromkeys(keys.events_streams(PARTITIONS), ">")
    await read_as(redis, "dead", streams, count=100)
    assert await pending(redis) == 9
    survivor = worker(redis, "survivor", claim_idle_ms=100)
    await asyncio.sleep(0.15)
    assert await survivor.reclaim() == 9
    assert await pending(redis) == 0
    for u in range(3):
        assert await applied(redis, f"u-{u}") == hashes(u, u + 3, u + 6)
    versions = [await version(redis, f"u-{u}") for u in range(3)]
    # reclaiming again finds nothing, and replaying the same events changes nothing
    assert await survivor.reclaim() == 0
    await append(redis, *(event(i, user=f"u-{i % 3}", item=f"it-{i % 5}") for i in range(9)))
    await drain(survivor)
    assert [await version(redis, f"u-{u}") for u in range(3)] == versions
    for u in range(3):
        assert await applied(redis, f"u-{u}") == hashes(u, u + 3, u + 6)
    assert survivor.outcomes[Outcome.DUPLICATE] == 9


async def test_the_worker_publishes_its_figures(redis: RedisClient) -> None:
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
    redis: RedisClient,
) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    clock = FakeClock(now=NOW)
    w = worker(redis, "tiered", clock=clock, freshness=TIERS)
    # power: 12 interactions today (the batch counts); casual: 1; active: 4
    await append(
        redis,
        *(event(i, user="power", item=f"it-{i % 5}") for i in range(12)),
        event(100, user="casual"),
        *(event(200 + i, user="active", item=f"it-{i}") for i in range(4)),
    )
    await drain(w)
    assert await applied(redis, "power") == hashes(*range(12))
    assert (await record(redis, "power")).interactions_today(int(NOW)) == 12
    assert await redis.get(keys.user_record("casual")) is None
    assert await redis.get(keys.user_record("active")) is None
    assert w.deferred == 5
    assert await pending(redis) == 5  # deferred entries stay pending: a crash loses nothing
    # a later interaction of a deferred user queues behind what is deferred
    await append(redis, event(300, user="casual", item="it-2"))
    await drain(w)
    assert w.deferred == 6
    clock.tick(301)
    await drain(w)
    assert await applied(redis, "active") == hashes(200, 201, 202, 203)
    assert await redis.get(keys.user_record("casual")) is None
    clock.tick(3600)
    await drain(w)
    assert await applied(redis, "casual") == hashes(100, 300)
    assert w.deferred == 0
    assert await pending(redis) == 0
    await w.upkeep()  # nothing deferred: nothing to renew


async def test_the_tiers_hold_only_while_the_worker_is_behind(redis: RedisClient) -> None:
    """Caught up, a casual user's click is applied at once; behind (what it reads is older
    than the overload lag), it is deferred for its tier; caught up again, applied at once."""
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    clock = FakeClock(now=time.time())  # the streams' ids are real time
    overload = FreshnessPolicy(active_delay_s=300, casual_delay_s=3600, overload_lag_s=10)
    w = worker(redis, "overload", clock=clock, freshness=overload)
    await append(redis, event(1, user="casual"))
    await drain(w)
    assert await applied(redis, "casual") == hashes(1)
    assert not w.deferring
    clock.tick(60)  # the worker's reads are now a minute behind its clock
    await append(redis, event(2, user="casual"), event(3, user="casual-2"))
    await drain(w)
    assert w.deferring
    assert w.deferred == 2
    assert await applied(redis, "casual") == hashes(1)
    clock.now = time.time() + 1  # caught up
    await append(redis, event(4, user="casual-3"))
    await drain(w)
    assert not w.deferring
    assert w.deferred == 0
    assert await applied(redis, "casual") == hashes(1, 2)
    assert await applied(redis, "casual-2") == hashes(3)
    assert await applied(redis, "casual-3") == hashes(4)


async def test_a_worker_that_catches_up_applies_what_it_deferred_a_batch_at_a_time(
    redis: RedisClient,
) -> None:
    """Deferred users are applied ``batch_size`` at a time, one slice per read, earliest due
    first: a worker that catches up keeps reading new entries meanwhile."""
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    clock = FakeClock(now=time.time() + 60)  # a minute ahead of the streams' ids: behind
    overload = FreshnessPolicy(active_delay_s=300, casual_delay_s=3600, overload_lag_s=10)
    w = worker(redis, "slices", clock=clock, freshness=overload, batch_size=2)
    await append(redis, *(event(k, user=f"casual-{k}") for k in range(1, 6)))
    await drain(w)
    assert w.deferred == 5
    clock.now = time.time() + 1  # caught up
    await append(redis, event(6, user="casual-6"))
    assert await w.poll(">") == 1  # the fresh entry, at once: the worker caught up
    assert not w.deferring
    assert await applied(redis, "casual-6") == hashes(6)
    # then each read applies two deferred users first (nothing new to read here)
    for left in (3, 1, 0):
        await w.poll(">")
        assert w.deferred == left
    assert await applied(redis, "casual-1") == hashes(1)
    assert await applied(redis, "casual-5") == hashes(5)


async def test_deferred_entries_are_not_reclaimed_while_their_worker_lives(
    redis: RedisClient,
) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    holder = worker(redis, "holder", claim_idle_ms=100, freshness=TIERS)
    await append(redis, event(1, user="casual"))
    await drain(holder)
    assert holder.deferred == 1
    other = worker(redis, "other")
    await asyncio.sleep(0.15)
    await holder.upkeep()  # renews the claim
    assert await other.reclaim() == 0


async def test_an_entry_of_another_stream_with_a_deferred_entrys_id_is_not_deferred(
    redis: RedisClient,
) -> None:
    # Entry ids are per stream: two streams hand out the same id in the same millisecond.
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    w = worker(redis, freshness=TIERS)
    casual = keys.events_stream(keys.partition_of("casual", PARTITIONS))
    await redis.xadd(casual, {EVENT_FIELD: encode_event(event(1, user="casual"))}, id="5-1")
    await drain(w)
    assert w.deferred == 1
    [other_partition] = {0, 1} - {keys.partition_of("casual", PARTITIONS)}
    [user] = users_of_partition(other_partition, 1)
    shown = (Shown("it-2", 1, 0.5, 1.0),)
    decision = Decision(
        "r-1", user, "user", "desktop_evening", "home", 0, "origin", "ts", "1", "m", shown
    )
    await redis.xadd(
        keys.decisions_stream(other_partition),
        {DECISION_FIELD: encode_decision(decision)},
        id="5-1",
    )
    await redis.xadd(
        keys.events_stream(other_partition),
        {EVENT_FIELD: encode_event(event(2, user=user, item="it-2", action="dismiss"))},
        id="5-1",
    )
    await drain(w)
    assert w.stats.decisions == 1
    assert await redis.hget(keys.user_decision(user, "r-1"), "d") is not None
    assert await applied(redis, user) == []  # a new user is casual: deferred too, by its own id
    assert w.deferred == 2
    assert await pending(redis) == 2  # the two deferred entries, and nothing else


async def test_the_status_report_shows_streams_and_workers(redis: RedisClient) -> None:
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
    # accepted, in the stream (kept for the retention once applied), pending
    assert row.split()[1:4] == ["2", "2", "0"]
    [worker_row] = [line for line in section(text, LIVE_HEADING) if line.startswith("w-status")]
    assert worker_row.split()[1] == "2"  # applied


def section(report_text: str, heading: str) -> list[str]:
    """The lines of one table of ``perso workers``."""
    [part] = [p for p in report_text.split("\n\n") if p.startswith(heading)]
    return part.splitlines()[1:]


async def test_totals_add_up_across_runs_of_a_consumer_name(redis: RedisClient) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    await append(redis, *(event(i, user=f"u-{i % 3}", item=f"it-{i % 5}") for i in range(4)))
    first = worker(redis, "w-1")
    await drain(first)
    await first.upkeep()
    # The process is replaced: a new worker under the same name, counting from 0.
    await append(redis, *(event(i, user=f"u-{i % 3}", item=f"it-{i % 5}") for i in range(4, 7)))
    second = worker(redis, "w-1")
    await drain(second)
    await second.upkeep()
    await second.publish_stats()  # publishing again adds nothing
    assert (await workers(redis))["w-1"]["applied"] == "3"  # this process's own
    assert (await totals(redis))["w-1"]["applied"] == 4 + 3
    text = await report(redis, PARTITIONS)
    [live] = [line for line in section(text, LIVE_HEADING) if line.startswith("w-1")]
    assert live.split()[1] == "3"
    totalled = [line.split() for line in section(text, TOTALS_HEADING)[2:]]
    n = len(TOTALLED)
    rows = {" ".join(cells[:-n]): cells[-n:] for cells in totalled}  # name: its counters
    assert rows["w-1"][2] == rows[ALL_WORKERS][2] == "7"  # applied


async def test_a_failed_publish_loses_nothing_and_a_lost_reply_counts_nothing_twice(
    redis: RedisClient, redis_url: str
) -> None:
    impatient = await open_client(redis_url, socket_timeout=0.2)
    run = WorkerTotals(impatient, "w-1", "run-a")
    try:
        await run.publish({"applied": 5, "batches": 1})
        # Redis holds the next publish past the client's patience: the client sees an
        # error, whether or not Redis applies the script once the pause is over.
        paused = node_of(redis, keys.worker_totals("w-1"))
        if paused is None:
            await redis.client_pause(500, all=False)
            with pytest.raises(RedisError):
                await run.publish({"applied": 8, "batches": 2})
        else:
            # The node of the totals' slot. A cluster client tries a timed-out command
            # again (after a failover it must): past the pause it may well succeed.
            await redis.client_pause(500, all=False, target_nodes=paused)
            with contextlib.suppress(RedisError):
                await run.publish({"applied": 8, "batches": 2})
        await asyncio.sleep(0.6)
        await run.publish({"applied": 8, "batches": 2})  # retried as it is now
        assert (await totals(redis))["w-1"] == {"applied": 8, "batches": 2}
        await run.publish({"applied": 10, "batches": 3})
        await WorkerTotals(impatient, "w-1", "run-b").publish({"applied": 1, "batches": 1})
        assert (await totals(redis))["w-1"] == {"applied": 11, "batches": 4}
    finally:
        await impatient.aclose()


async def test_a_restarted_worker_takes_back_what_it_deferred_and_does_not_loop(
    redis: RedisClient,
) -> None:
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    await append(redis, event(1, user="casual"), event(2, user="casual", item="it-2"))
    first = worker(redis, "same-name", freshness=TIERS)
    await drain(first)
    assert first.deferred == 2
    # the process restarts: a new worker of the same name finds its pending entries
    clock = FakeClock(now=NOW)
    restarted = worker(redis, "same-name", clock=clock, freshness=TIERS)
    assert await asyncio.wait_for(restarted.drain_own_pending(), 5.0) == 2
    assert restarted.deferred == 2
    clock.tick(3601)
    await drain(restarted)
    assert await applied(redis, "casual") == hashes(1, 2)
    assert await pending(redis) == 0


async def test_the_elected_worker_estimates_the_population_prior_and_every_worker_uses_it(
    redis: RedisClient,
) -> None:
    """Forty users all clicking the item along axis 1: the elected worker's estimate puts
    the population's mean taste along it, stores it with a version, and the users a worker
    updates afterwards are updated under it (a new user's first click starts from there)."""
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    w = worker(redis, "estimator", population_every_s=1.0)
    await append(redis, *(event(n, user=f"fan-{n}", item="it-1") for n in range(40)))
    await drain(w)
    assert await redis.get(keys.POPULATION_PRIOR) is None  # nothing estimated yet
    await w.upkeep()  # elected: the trimmer, and the population's estimator
    stored = await PopulationStore(redis, time.monotonic).read()
    assert stored is not None
    assert (stored.version, stored.users, stored.dim) == (1, 40, DIM)
    assert int(np.argmax(stored.mean)) == 1
    assert w.stats.population_version == 1
    # a new user's first click on another item, under the population prior
    before = await record(redis, "fan-0")
    await append(redis, event(100, user="newcomer", item="it-3"))
    await drain(w)
    newcomer = (await record(redis, "newcomer")).model
    assert newcomer is not None
    seen = under(newcomer, w._population.learnt_var, stored)
    assert seen.mean[1] > 0  # they start where users are
    assert seen.mean[3] > 0  # and their own click moved them
    assert (await record(redis, "fan-0")).version == before.version  # nobody else rewritten
    # the next estimate, due after a second, has the next version
    clock = FakeClock(now=NOW + 2)
    later = worker(redis, "estimator", clock=clock, population_every_s=1.0)
    await later.trimmer.resign()
    await w.trimmer.resign()
    await append(redis, *(event(200 + n, user=f"fan-{n}", item="it-1") for n in range(40)))
    await drain(later)
    await later.upkeep()
    again = await PopulationStore(redis, time.monotonic).read()
    assert again is not None
    assert again.version == 2


async def test_a_prior_of_rank_learns_which_tastes_go_together(redis: RedisClient) -> None:
    """Half the users click it-1 and it-2, the other half it-3 and it-4: the elected
    worker's estimate of rank 1 finds the direction those tastes co-vary in, and a
    newcomer's click on it-1 alone, ranked under it, moves them toward it-2 and away from
    it-3."""
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    w = worker(redis, "estimator", population_every_s=1.0, population_rank=1)
    pairs = [("it-1", "it-2"), ("it-3", "it-4")]
    clicks = [
        event(10 * n + k, user=f"fan-{n}", item=pairs[n % 2][k % 2])
        for n in range(60)
        for k in range(4)
    ]
    await append(redis, *clicks)
    await drain(w)
    await w.upkeep()
    stored = await PopulationStore(redis, time.monotonic).read()
    assert stored is not None
    assert stored.rank == 1
    assert stored.basis is not None
    axis = stored.basis[:, 0]
    assert axis[1] * axis[2] > 0
    assert axis[3] * axis[4] > 0
    assert axis[1] * axis[3] < 0
    await append(redis, event(1000, user="newcomer", item="it-1"))
    await drain(w)
    newcomer = (await record(redis, "newcomer")).model
    assert newcomer is not None
    seen = for_ranking(newcomer, w._population.learnt_var, stored)
    assert seen.factor is not None
    assert seen.mean[2] > stored.mean[2]  # it-2 goes with it-1
    assert seen.mean[3] < stored.mean[3]  # it-3 does not
