from __future__ import annotations

from typing import Any

import pytest

from origin.event_streams.event_log import FeedbackLog
from protocol import keys
from protocol.api import FeedbackRequest
from protocol.client_time import NOW
from protocol.events import decode_event
from redis_client.client import RedisClient, is_cluster_client
from redis_client.durable import Durability, NotReplicated
from tests.fakes import FakeClock

pytestmark = pytest.mark.cluster

PARTITIONS = 4


def request(**changes: Any) -> FeedbackRequest:
    body: dict[str, Any] = {
        "user_id": "u-1",
        "session_id": "s-1",
        "request_id": "r-1",
        "feedback": [
            {"item_id": "it-1", "action": "click", "position": 2},
            {"item_id": "it-2", "action": "view", "timestamp": "2026-01-01T00:00:05Z"},
        ],
    }
    body.update(changes)
    return FeedbackRequest.model_validate(body, context={NOW: 1_767_225_600.0})


def feedback_log(redis: RedisClient, clock: FakeClock) -> FeedbackLog:
    return FeedbackLog(redis, partitions=PARTITIONS, dedup_ttl_s=60, clock=clock)


async def entries(redis: RedisClient, user_id: str) -> list[tuple[bytes, dict[bytes, bytes]]]:
    stream = keys.events_stream(keys.partition_of(user_id, PARTITIONS))
    return list(await redis.xrange(stream))


async def test_events_land_in_the_users_partition(redis: RedisClient) -> None:
    clock = FakeClock(now=1_767_225_600.0)
    assert await feedback_log(redis, clock).record(request()) == 2
    stored = [decode_event(fields[b"e"]) for _, fields in await entries(redis, "u-1")]
    assert [(e.item_id, e.action) for e in stored] == [("it-1", "click"), ("it-2", "view")]
    first, second = stored
    assert first.timestamp_ms == first.accepted_ms == 1_767_225_600_000  # no client timestamp
    assert second.timestamp_ms == 1_767_225_605_000
    assert (first.position, first.session_id, first.request_id) == (2, "s-1", "r-1")
    total = sum([await redis.xlen(s) for s in keys.events_streams(PARTITIONS)])
    assert total == 2


async def test_a_retried_request_is_not_appended_twice(redis: RedisClient) -> None:
    log = feedback_log(redis, FakeClock())
    assert await log.record(request()) == 2
    assert await log.record(request()) == 0
    assert len(await entries(redis, "u-1")) == 2


async def test_explicit_interaction_ids_decide_identity(redis: RedisClient) -> None:
    log = feedback_log(redis, FakeClock())
    one = {"item_id": "it-1", "action": "click", "interaction_id": "ix-a"}
    assert await log.record(request(feedback=[one])) == 1
    # same id, even from another request: the same interaction
    assert await log.record(request(request_id="r-2", feedback=[one])) == 0
    assert await log.record(request(feedback=[{**one, "interaction_id": "ix-b"}])) == 1


async def test_another_users_interaction_id_never_silences_this_users_feedback(
    redis: RedisClient,
) -> None:
    log = feedback_log(redis, FakeClock())
    item = {"item_id": "it-1", "action": "purchase", "interaction_id": "ix-1"}
    # pick two users of one partition, where a shared mark would have collided
    users = [u for u in (f"user-{n}" for n in range(50)) if keys.partition_of(u, PARTITIONS) == 0]
    first, second = users[:2]
    assert await log.record(request(user_id=first, feedback=[item])) == 1
    assert await log.record(request(user_id=second, feedback=[item])) == 1


async def test_duplicates_inside_one_request_count_once(redis: RedisClient) -> None:
    log = feedback_log(redis, FakeClock())
    item = {"item_id": "it-1", "action": "click", "interaction_id": "ix-same"}
    assert await log.record(request(feedback=[item, item])) == 1


async def test_dedup_marks_expire(redis: RedisClient) -> None:
    log = FeedbackLog(redis, partitions=PARTITIONS, dedup_ttl_s=60, clock=FakeClock())
    await log.record(request())
    partition = keys.partition_of("u-1", PARTITIONS)
    marks = [k async for k in redis.scan_iter(match=f"events:{{{partition}}}:seen:*")]
    assert len(marks) == 2
    for mark in marks:
        assert 0 < await redis.ttl(mark) <= 60


async def test_an_event_a_replica_must_confirm_is_acknowledged_once_it_has(
    redis: RedisClient,
) -> None:
    """On the cluster tier every primary has a replica, which confirms within the bound; on
    one node there is none: the append is on the primary, not acknowledged, and a retry
    (deduplicated) is refused alike, never appended twice."""
    log = FeedbackLog(
        redis,
        partitions=PARTITIONS,
        dedup_ttl_s=60,
        clock=FakeClock(),
        durability=Durability(replicas=1, timeout_ms=500 if is_cluster_client(redis) else 50),
    )
    if is_cluster_client(redis):
        assert await log.record(request()) == 2
        assert await log.record(request()) == 0
    else:
        for _ in range(2):
            with pytest.raises(NotReplicated, match="0 of 1 replicas"):
                await log.record(request())
    assert len(await entries(redis, "u-1")) == 2
