"""Reading the consumer group's entries partition by partition.

A partition's two streams (``events:{p}`` and ``decisions:{p}``) share its hash tag, so one
``XREADGROUP`` may name both, on a single node and on a Redis Cluster alike; a read naming
several partitions' streams is refused by a cluster (``CROSSSLOT``). So a worker reads each
partition on its own:

- ``read_now``: every partition at once without blocking, in one pipeline (one round trip
  on a node; on a cluster one per node, in parallel). What a worker drains its own pending
  entries and a test's ``poll`` with.
- ``PartitionReaders``: while a worker runs, one task per partition blocks on its
  partition's new entries (``>``) and hands what it read to the batch loop through a
  bounded queue. A blocking read per partition, rather than one over all of them, is what
  lets the worker wait for the first new entry anywhere without polling. Entries a reader
  hands over are pending in Redis until the batch that holds them is acknowledged; the
  queue holds at most two reads per partition, so a slow batch makes the readers wait
  rather than read the streams into memory. Once ``stop`` is set each reader returns
  within its block time, after handing over what its last read returned, so nothing read
  is left unhandled by a worker that stops on request (a killed worker's pending entries
  are reclaimed by the others, as before).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Sequence
from typing import Any, cast

from redis.exceptions import RedisError, ResponseError

from origin.event_streams.streams import StreamEntry, StreamReply, ensure_partition_groups
from protocol import keys
from redis_client.client import RedisClient
from resilience.backoff import wait_s

log = logging.getLogger(__name__)

# A reader's pause after a Redis failure: doubling from 0.1 s up to 5 s, jittered.
BACKOFF_BASE_S = 0.1
BACKOFF_CAP_S = 5.0
# Reads a queue holds per partition before the readers wait for the batch loop.
QUEUED_READS_PER_PARTITION = 2


def partition_streams(partition: int) -> tuple[str, str]:
    """The two streams of ``partition`` a worker reads: its events, its decisions."""
    return keys.events_stream(partition), keys.decisions_stream(partition)


def entries_of(reply: StreamReply, field_of: dict[str, bytes]) -> list[StreamEntry]:
    """An XREADGROUP reply as entries, each with the payload field of its stream (None
    for a pending entry deleted from the stream since)."""
    out: list[StreamEntry] = []
    for raw_stream, batch in reply or []:
        stream = raw_stream.decode() if isinstance(raw_stream, bytes) else str(raw_stream)
        field = field_of[stream]
        out += [
            StreamEntry(stream, entry_id, fields.get(field, b"") if fields else None)
            for entry_id, fields in batch
        ]
    return out


async def read_now(
    redis: RedisClient,
    consumer: str,
    positions: dict[str, str],
    *,
    count: int,
    field_of: dict[str, bytes],
    partition_of: dict[str, int],
) -> list[StreamEntry]:
    """One non-blocking read of the streams in ``positions`` (stream -> id to read after,
    ``>`` for new entries), partition by partition in one pipeline; up to ``count`` entries
    per partition."""
    by_partition: dict[int, dict[str, str]] = {}
    for stream, position in positions.items():
        by_partition.setdefault(partition_of[stream], {})[stream] = position
    if not by_partition:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for streams in by_partition.values():
            pipe.xreadgroup(keys.WORKER_GROUP, consumer, cast(Any, streams), count=count)
        replies = await pipe.execute()
    out: list[StreamEntry] = []
    for reply in replies:
        out += entries_of(cast(StreamReply, reply), field_of)
    return out


class PartitionReaders:
    """One blocking reader per partition feeding ``take``; ``run`` until ``stop``."""

    def __init__(
        self,
        redis: RedisClient,
        consumer: str,
        partitions: Sequence[int],
        *,
        count: int,
        block_ms: int,
        field_of: dict[str, bytes],
        rng: random.Random | None = None,
    ) -> None:
        self._redis = redis
        self._consumer = consumer
        self._partitions = tuple(partitions)
        self._count = count
        self._block_ms = block_ms
        self._field_of = field_of
        self._rng = rng or random.Random()
        self._queue: asyncio.Queue[list[StreamEntry]] = asyncio.Queue(
            maxsize=max(1, QUEUED_READS_PER_PARTITION * len(self._partitions))
        )
        self.failures = 0  # Redis failures met by the readers (each followed by a pause)

    async def run(self, stop: asyncio.Event) -> None:
        """Read every partition until ``stop``; returns once every reader has handed over
        its last read."""
        await asyncio.gather(*(self._read_partition(p, stop) for p in self._partitions))

    async def take(self, timeout_s: float, at_most: int) -> list[StreamEntry]:
        """Entries read so far, waiting up to ``timeout_s`` for the first read; then more
        reads while they are at hand, up to about ``at_most`` entries (a read is not
        split)."""
        try:
            out = await asyncio.wait_for(self._queue.get(), max(0.0, timeout_s))
        except TimeoutError:
            return []
        while len(out) < at_most and not self._queue.empty():
            out += self._queue.get_nowait()
        return out

    def take_ready(self) -> list[StreamEntry]:
        """Every read handed over and not yet taken (for a worker's last batch)."""
        out: list[StreamEntry] = []
        while not self._queue.empty():
            out += self._queue.get_nowait()
        return out

    async def _read_partition(self, partition: int, stop: asyncio.Event) -> None:
        streams: dict[Any, Any] = dict.fromkeys(partition_streams(partition), ">")
        attempt = 0
        while not stop.is_set():
            try:
                reply = await self._redis.xreadgroup(
                    keys.WORKER_GROUP,
                    self._consumer,
                    streams,
                    count=self._count,
                    block=self._block_ms,
                )
            except RedisError as exc:
                self.failures += 1
                if isinstance(exc, ResponseError) and "NOGROUP" in str(exc):
                    # The streams or the group went away (a flush): make them again.
                    with contextlib.suppress(RedisError):
                        await ensure_partition_groups(self._redis, partition)
                pause = wait_s(
                    attempt,
                    self._rng.random(),
                    base_s=BACKOFF_BASE_S,
                    cap_s=BACKOFF_CAP_S,
                    jitter="equal",
                )
                attempt += 1
                log.warning("partition %d read failed: %r; again in %.1fs", partition, exc, pause)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), pause)
                continue
            attempt = 0
            entries = entries_of(cast(StreamReply, reply), self._field_of)
            if entries:
                await self._queue.put(entries)
