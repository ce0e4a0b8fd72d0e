"""A task cancelled while redis-py sends its command ends cancelled
(``redis_client.connections.KeepsCancellation``): on Python 3.11 ``asyncio.wait_for``, in
which redis-py sends, dropped such a cancellation, and a reader blocked in ``XREAD`` read
on as if never cancelled. Against the suite's Redis (a node, or the cluster tier's)."""

from __future__ import annotations

import asyncio

import pytest

from protocol import keys
from redis_client.client import RedisClient

pytestmark = pytest.mark.cluster

STREAM = keys.ORIGINS_SYNC_STREAM  # any stream: one slot


async def test_a_reader_cancelled_as_it_sends_ends_cancelled_at_once(redis: RedisClient) -> None:
    await redis.xadd(STREAM, {"d": b"x"})
    outcomes: list[str] = []
    for _ in range(20):
        reader = asyncio.create_task(redis.xread({STREAM: "$"}, count=10, block=5000))
        await asyncio.sleep(0)  # it runs to its send, then is cancelled there
        reader.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(reader), timeout=1.0)
            outcomes.append("read on")  # the cancellation was dropped
        except asyncio.CancelledError:
            outcomes.append("cancelled")
        except TimeoutError:
            outcomes.append("blocked")  # still waiting out its block
            reader.cancel()
    assert outcomes == ["cancelled"] * 20
    # The connections of the cancelled reads were dropped, not handed on with a reply
    # pending: the next commands read their own replies.
    await redis.set(keys.ORIGINS_SYNC_STREAM + ":probe", b"1")
    assert await redis.get(keys.ORIGINS_SYNC_STREAM + ":probe") == b"1"
    assert await redis.xlen(STREAM) == 1
