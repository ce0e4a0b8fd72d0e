"""The logs' retention (``origin.worker.retention``) against the real Redis: entries older
than the retention or beyond the size cap go once the workers have them, and never before.

Trimming is approximate (whole radix-tree nodes of up to 100 small entries), so the
assertions bound what is left rather than count it exactly; what must never go (an entry
the group still needs) is checked entry by entry.
"""

from __future__ import annotations

import time

import pytest
from redis.asyncio import Redis

from decision_log.writer import Retention
from origin.event_streams.streams import ensure_groups
from origin.worker.consumer import StreamWorker
from origin.worker.retention import LogRetention, LogTrimmer
from protocol import keys
from protocol.events import EVENT_FIELD
from tests.fakes import FakeClock

DAY_MS = 86_400_000
WEEK_S = 7 * 86_400.0
STREAM = keys.events_stream(0)
NODE = 100  # stream-node-max-entries: what approximate trimming removes at a time

# A partition's logs share its slot: the trimmer works the same on a Redis Cluster.
pytestmark = pytest.mark.cluster


def now_ms() -> int:
    return int(time.time() * 1000)


async def add(redis: Redis, stream: str, first_ms: int, n: int) -> list[bytes]:
    """``n`` entries with ids from ``first_ms`` on, one a millisecond."""
    return [await redis.xadd(stream, {EVENT_FIELD: b"x"}, id=f"{first_ms + i}-0") for i in range(n)]


async def read(redis: Redis, n: int, stream: str = STREAM) -> None:
    await redis.xreadgroup(keys.WORKER_GROUP, "a", {stream: ">"}, count=n)


async def ids(redis: Redis, stream: str = STREAM) -> list[bytes]:
    return [entry_id for entry_id, _ in await redis.xrange(stream)]


def trimmer(redis: Redis, events: Retention, partitions: int = 1) -> LogTrimmer:
    return LogTrimmer(redis, partitions, LogRetention(events=events))


async def test_old_acknowledged_entries_go_and_unacknowledged_ones_stay(redis: Redis) -> None:
    await ensure_groups(redis, 1)
    now = now_ms()
    old = await add(redis, STREAM, now - 10 * DAY_MS, 3 * NODE)
    recent = await add(redis, STREAM, now - 60_000, NODE)
    await read(redis, 4 * NODE)
    await redis.xack(STREAM, keys.WORKER_GROUP, *old[:200])
    week = trimmer(redis, Retention(WEEK_S, 1_000_000))
    # Ten days old, but 100 of them not acknowledged: they and all after them stay.
    trimmed = await week.trim(now)
    assert trimmed.spared == {STREAM: (now - 10 * DAY_MS + 200, 0)}
    assert 0 < trimmed.removed <= 200
    assert await ids(redis) == (old + recent)[trimmed.removed :]  # the oldest went
    # Acknowledged: now they go, down to the retention point.
    await redis.xack(STREAM, keys.WORKER_GROUP, *old[200:], *recent)
    again = await week.trim(now)
    assert again.spared == {}
    left = await ids(redis)
    assert recent == left[-NODE:]
    assert len(left) - NODE < NODE  # at most a node straddling the retention point


async def test_a_never_read_backlog_older_than_the_retention_is_kept(redis: Redis) -> None:
    await ensure_groups(redis, 1)
    now = now_ms()
    backlog = await add(redis, STREAM, now - 30 * DAY_MS, 3 * NODE)
    trimmed = await trimmer(redis, Retention(WEEK_S, 1000)).trim(now)
    assert (trimmed.removed, list(trimmed.spared)) == (0, [STREAM])
    assert await ids(redis) == backlog


async def test_the_size_cap_keeps_the_newest_entries_once_acknowledged(redis: Redis) -> None:
    await ensure_groups(redis, 1)
    now = now_ms()
    first = await add(redis, STREAM, now - 100_000, 10 * NODE)
    await read(redis, 10 * NODE)
    await redis.xack(STREAM, keys.WORKER_GROUP, *first)
    cap = Retention(WEEK_S, 3 * NODE)
    trimmed = await trimmer(redis, cap).trim(now)
    assert trimmed.spared == {}
    left = await ids(redis)
    assert 3 * NODE <= len(left) < 4 * NODE
    assert left == first[-len(left) :]


async def test_the_size_cap_never_removes_a_backlog_longer_than_it(redis: Redis) -> None:
    await ensure_groups(redis, 1)
    now = now_ms()
    done = await add(redis, STREAM, now - 100_000, 5 * NODE)
    await read(redis, 5 * NODE)
    await redis.xack(STREAM, keys.WORKER_GROUP, *done)
    # Then 600 more that no worker has read yet, twice the cap.
    backlog = await add(redis, STREAM, now - 50_000, 6 * NODE)
    trimmed = await trimmer(redis, Retention(WEEK_S, 3 * NODE)).trim(now)
    assert list(trimmed.spared) == [STREAM]
    left = await ids(redis)
    assert left[-len(backlog) :] == backlog  # every unread entry
    # What the workers had applied went (by whole nodes).
    assert len(left) - len(backlog) <= NODE
    # A pending entry is a floor as well: read 100 of the backlog, acknowledge none.
    await read(redis, NODE)
    await trimmer(redis, Retention(WEEK_S, 3 * NODE)).trim(now)
    assert (await ids(redis))[-len(backlog) :] == backlog


async def test_logs_no_group_reads_are_trimmed_by_age_and_size(redis: Redis) -> None:
    now = now_ms()
    contexts = keys.contexts_stream(0)
    await add(redis, contexts, now - 9 * DAY_MS, 2 * NODE)
    recent = await add(redis, contexts, now - 60_000, 10 * NODE)
    logs = LogTrimmer(redis, 1, LogRetention(logs=Retention(WEEK_S, 5 * NODE)))
    trimmed = await logs.trim(now)
    assert trimmed.spared == {}
    left = await ids(redis, contexts)
    assert 5 * NODE <= len(left) < 6 * NODE
    assert left == recent[-len(left) :]


async def test_the_elected_worker_trims_and_counts_what_the_floor_spared(redis: Redis) -> None:
    """Through ``upkeep``: the worker's clock a month ahead, so the entries appended now are
    older than a week; the group has read none of them."""
    await ensure_groups(redis, 2)
    stream = keys.events_stream(1)
    backlog = await add(redis, stream, now_ms() - 1000, 2 * NODE)
    clock = FakeClock(now=time.time() + 30 * 86_400)
    w = StreamWorker(
        redis, partitions=2, dim=8, consumer="w-r", clock=clock, block_ms=50, claim_idle_ms=100
    )
    await w.upkeep()
    assert w.trimmer.is_leader
    assert (w.stats.trimmed, w.stats.retention_spared) == (0, 1)
    assert await ids(redis, stream) == backlog
    stats = await redis.hgetall(keys.worker_stats("w-r"))
    assert stats[b"retention_spared"] == b"1"
    # Read and acknowledged: the next upkeep trims them all but the node holding the last.
    await read(redis, 2 * NODE, stream)
    await redis.xack(stream, keys.WORKER_GROUP, *backlog)
    await w.upkeep()
    assert w.stats.retention_spared == 1
    assert w.stats.trimmed >= NODE
    assert await redis.xlen(stream) <= NODE


@pytest.mark.parametrize("stream", [keys.decisions_stream(0), keys.events_stream(0)])
async def test_a_trim_of_a_missing_stream_is_nothing(redis: Redis, stream: str) -> None:
    trimmed = await trimmer(redis, Retention(WEEK_S, 1000)).trim(now_ms())
    assert (trimmed.removed, trimmed.spared) == (0, {})
    assert not await redis.exists(stream)
