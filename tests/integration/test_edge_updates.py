"""The workers' publish hook: a batch's updated users reach every region's sync stream."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from origin.learned import stated_preferences
from origin.worker.batch import Published
from origin.worker.edge_updates import EdgeUpdates, in_turn
from protocol import keys
from protocol.user_model_wire import decode_preferences
from relevance.user_model import UserModel, model_bytes, model_from_bytes
from sync.codec import decode_entry
from sync.messages import UserUpdate
from sync.publisher import SyncPublisher
from tests.fakes import FakeClock

pytestmark = pytest.mark.cluster


REGIONS = ("us-east", "eu-west")


async def test_a_batch_is_one_publish_to_every_region(redis: Redis) -> None:
    updates = EdgeUpdates(SyncPublisher(redis, REGIONS, FakeClock()))
    seen: list[list[Published]] = []

    async def mirror(batch: list[Published]) -> None:
        seen.append(batch)

    hook = in_turn(mirror, updates.publish)
    ann = UserModel(np.array([0.5, -1, 0, 2], np.float32), np.full(4, 0.25, np.float32))
    bob = UserModel.prior(4)
    await hook([("ann", 3, ann), ("bob", 7, bob)])
    await hook([])
    assert [[user for user, _, _ in batch] for batch in seen] == [["ann", "bob"], []]
    assert updates.published == 2
    for region in REGIONS:
        entries = await redis.xrange(keys.edge_sync_stream(region))
        messages = [decode_entry(fields)[0].message for _, fields in entries]
        # each user's model travels with the update: an edge can rank for them unasked
        assert messages == [
            UserUpdate("ann", 3, model=model_bytes(ann)),
            UserUpdate("bob", 7, model=model_bytes(bob)),
        ]
        first = messages[0]
        assert isinstance(first, UserUpdate)
        assert first.model is not None
        assert model_from_bytes(first.model, 4).mean.tolist() == ann.mean.tolist()


async def test_a_failed_publish_is_counted_not_raised(redis: Redis) -> None:
    updates = EdgeUpdates(SyncPublisher(redis, REGIONS, FakeClock()))
    await redis.set(keys.edge_sync_stream("us-east"), "not a stream")  # the script refuses
    await updates.publish([("ann", 1, UserModel.prior(4))])
    assert (updates.published, updates.failed) == (0, 1)


async def test_each_users_stated_preferences_travel_with_their_model(redis: Redis) -> None:
    """Read in one round trip per batch, with their version (the write's fencing token):
    an edge that gets the update needs to ask the origin nothing about the user."""
    await redis.hset(keys.user_preferences("ann"), mapping={"c:books": "-1.0", "fencing": "7"})
    updates = EdgeUpdates(
        SyncPublisher(redis, REGIONS, FakeClock()),
        preferences=functools.partial(stated_preferences.read_many, redis),
    )
    await updates.publish([("ann", 3, UserModel.prior(4)), ("bob", 1, UserModel.prior(4))])
    entries = await redis.xrange(keys.edge_sync_stream("us-east"))
    ann, bob = (decode_entry(fields)[0].message for _, fields in entries)
    assert isinstance(ann, UserUpdate)
    assert isinstance(bob, UserUpdate)
    assert ann.preferences is not None
    assert bob.preferences is not None
    assert (decode_preferences(ann.preferences), ann.preferences_version) == ({"books": -1.0}, 7)
    assert (decode_preferences(bob.preferences), bob.preferences_version) == ({}, 0)


async def test_unreadable_preferences_leave_the_models_to_go_alone(redis: Redis) -> None:
    async def fails(users: Sequence[str]) -> dict[str, tuple[dict[str, float], int]]:
        raise RedisConnectionError("down")

    updates = EdgeUpdates(SyncPublisher(redis, REGIONS, FakeClock()), preferences=fails)
    await updates.publish([("ann", 3, UserModel.prior(4))])
    entries = await redis.xrange(keys.edge_sync_stream("us-east"))
    (message,) = (decode_entry(fields)[0].message for _, fields in entries)
    assert message == UserUpdate("ann", 3, model=model_bytes(UserModel.prior(4)))
    assert (updates.published, updates.preferences_unread) == (1, 1)
