"""User vectors mirrored into Qdrant by the worker's batch hook: written in batches, the
newest version wins, and a failing Qdrant costs a buffer and a retry, never the worker."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import numpy as np
import pytest
from redis.asyncio import Redis

from config.settings import Settings
from origin.catalog.vector_store import VectorStore
from origin.event_streams.streams import ensure_groups
from origin.learned.user_models import decode_record
from origin.worker.consumer import StreamWorker
from origin.worker.qdrant_sink import UserVectorSink
from protocol import keys
from protocol.events import FeedbackEvent, encode_event
from protocol.vectors import pack_vector
from relevance.user_model import UserModel
from tests.fakes import FakeClock

DIM = 8
NOW = 1_767_225_600.0


@pytest.fixture
async def store(make_settings: Callable[..., Settings]) -> AsyncIterator[VectorStore]:
    opened = VectorStore.open(make_settings(embedding_dim=DIM))
    await opened.ensure_users_collection()
    yield opened
    await opened.close()


async def test_the_worker_mirrors_written_users_into_qdrant(
    redis: Redis, store: VectorStore
) -> None:
    for i in range(3):
        await redis.set(keys.item_vector(f"it-{i}"), pack_vector(np.eye(DIM)[i]))
    await ensure_groups(redis, 1)
    ms = int(NOW * 1000)
    for n in range(6):
        event = FeedbackEvent(f"ix-{n}", f"u-{n % 2}", f"it-{n % 3}", "click", ms, ms)
        await redis.xadd(keys.events_stream(0), {"e": encode_event(event)})
    clock = FakeClock(NOW)
    sink = UserVectorSink(store, clock=clock)
    worker = StreamWorker(
        redis, partitions=1, dim=DIM, consumer="w", clock=clock, on_batch=sink.publish
    )
    while await worker.poll(">") > 0:
        pass
    for user in ("u-0", "u-1"):
        stored = await store.get_user(user)
        assert stored is not None
        version, vector = stored
        record = decode_record(await redis.get(keys.user_record(user)), DIM)
        assert record.model is not None
        assert version == record.version >= 1
        # the model's mean, in the direction Qdrant keeps (cosine: unit length)
        mean = record.model.mean / np.linalg.norm(record.model.mean)
        np.testing.assert_allclose(vector / np.linalg.norm(vector), mean, atol=1e-3)
    assert sink.buffered == 0


async def test_a_failing_qdrant_buffers_and_retries_later(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(embedding_dim=DIM)
    broken = VectorStore.open(settings)
    await broken.ensure_users_collection()
    await broken.close()  # every call now fails
    clock = FakeClock(NOW)
    sink = UserVectorSink(broken, clock=clock)
    vector = np.ones(DIM, np.float32) / np.sqrt(DIM)
    model = UserModel(vector, np.full(DIM, 0.1, np.float32))
    await sink.publish([("u-1", 1, model)])
    await sink.publish([("u-1", 2, model), ("u-2", 1, model)])  # waits: no new attempt
    assert sink.buffered == 2
    healthy = VectorStore.open(settings)
    try:
        sink._store = healthy  # the service is back
        clock.tick(1.0)
        await sink.publish([])
        assert sink.buffered == 0
        stored = await healthy.get_user("u-1")
        assert stored is not None
        assert stored[0] == 2  # the newest version was kept while waiting
    finally:
        await healthy.close()
