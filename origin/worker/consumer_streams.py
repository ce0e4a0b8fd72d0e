"""The streams a stream worker consumes (``origin.worker.consumer``), as one consumer of the
``embedder`` group: every ``events:{p}`` and ``decisions:{p}`` partition, each entry's field
by its stream, and what the worker does to entries besides applying them: reading what is
there now, reading its own pending entries again after a restart, taking over other
consumers' stale ones (XAUTOCLAIM), renewing its claim on the entries it defers,
acknowledging them once they are durable, parking the ones that can never be applied, and
how far the group lags.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from origin.event_streams.streams import StreamEntry, consumer_lag_ms, ensure_groups
from origin.worker.partition_reads import PartitionReaders, read_now
from protocol import keys
from protocol.decisions import DECISION_FIELD
from protocol.events import EVENT_FIELD
from redis_client.client import RedisClient
from redis_client.durable import Durability

# What the worker does to a batch of entries it read (``StreamWorker.handle``).
Handle = Callable[[Sequence[StreamEntry]], Awaitable[None]]


class ConsumerStreams:
    """The event and decision streams of ``partitions``, read by ``consumer`` up to
    ``count`` entries a partition at a time."""

    def __init__(
        self,
        redis: RedisClient,
        partitions: int,
        consumer: str,
        *,
        count: int,
        claim_idle_ms: int,
        durability: Durability,
    ) -> None:
        self._redis = redis
        self._consumer = consumer
        self._partitions = partitions
        self._count = count
        self._claim_idle_ms = claim_idle_ms
        # Replicas that must hold what a batch wrote before it is acknowledged.
        self._durability = durability
        self.events = keys.events_streams(partitions)
        decision_streams = keys.decisions_streams(partitions)
        self._decision_streams = set(decision_streams)
        self.names = [*self.events, *decision_streams]
        self.partition_of = {
            stream: p
            for streams in (self.events, decision_streams)
            for p, stream in enumerate(streams)
        }
        self.field_of = {s: self._field_of_stream(s) for s in self.names}

    async def ensure_groups(self) -> None:
        """The group on every stream, created where it is missing (``ensure_groups``)."""
        await ensure_groups(self._redis, self._partitions)

    def blocking_readers(self, block_ms: int) -> PartitionReaders:
        """A blocking reader per partition (``origin.worker.partition_reads``)."""
        return PartitionReaders(
            self._redis,
            self._consumer,
            range(self._partitions),
            count=self._count,
            block_ms=block_ms,
            field_of=self.field_of,
        )

    def holds_decisions(self, stream: str) -> bool:
        return stream in self._decision_streams

    def _field_of_stream(self, stream: str) -> bytes:
        return DECISION_FIELD if stream in self._decision_streams else EVENT_FIELD

    async def read_now(self, positions: dict[str, str]) -> list[StreamEntry]:
        """What is there now after each stream's position (``origin.worker.partition_reads``)."""
        return await read_now(
            self._redis,
            self._consumer,
            positions,
            count=self._count,
            field_of=self.field_of,
            partition_of=self.partition_of,
        )

    async def drain_own_pending(self, handle: Handle) -> int:
        """Entries delivered to this consumer name before a restart and never acknowledged,
        read once each (a cursor per stream: entries it holds stay pending, and must not be
        read again and again) and handled. Returns how many were read."""
        cursors: dict[str, str] = dict.fromkeys(self.names, "0")
        total = 0
        while cursors:
            entries = await self.read_now(cursors)
            if not entries:
                return total
            await handle(entries)
            total += len(entries)
            done = set(cursors)
            for entry in entries:
                cursors[entry.stream] = entry.entry_id.decode()
                done.discard(entry.stream)
            for stream in done:  # nothing more pending there
                del cursors[stream]
        return total

    async def reclaim(self, handle: Handle) -> int:
        """Take over entries other consumers read but have not acknowledged for
        ``claim_idle_ms`` (a worker that died mid-batch), and handle them; returns how
        many."""
        total = 0
        for stream in self.names:
            start = "0-0"
            while True:
                reply = await self._redis.xautoclaim(
                    stream,
                    keys.WORKER_GROUP,
                    self._consumer,
                    self._claim_idle_ms,
                    start_id=start,
                    count=self._count,
                )
                start = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
                field = self.field_of[stream]
                entries = [
                    StreamEntry(stream, entry_id, (fields or {}).get(field) if fields else None)
                    for entry_id, fields in reply[1]
                ]
                if entries:
                    await handle(entries)
                    total += len(entries)
                if start == "0-0" or not entries:
                    break
        return total

    async def renew(self, ids_by_stream: Mapping[str, list[bytes]]) -> None:
        """Claim deferred entries again (idle time back to 0), so that no other worker takes
        them for a dead worker's."""
        for stream, ids in ids_by_stream.items():
            await self._redis.xclaim(
                stream, keys.WORKER_GROUP, self._consumer, 0, list(ids), justid=True
            )

    async def ack(self, entries: Sequence[StreamEntry]) -> None:
        """Acknowledge ``entries``, once what applying them wrote is on the replicas that
        must hold it (``redis_client.durable``: a failover must not undo what an entry
        taught after the entry left the pending list)."""
        if not entries:
            return
        await self._durability.barrier(self._redis, keys.replication_barrier)
        by_stream: dict[str, list[bytes]] = {}
        for entry in entries:
            by_stream.setdefault(entry.stream, []).append(entry.entry_id)
        async with self._redis.pipeline(transaction=False) as pipe:
            for stream, ids in by_stream.items():
                pipe.xack(stream, keys.WORKER_GROUP, *ids)
            await pipe.execute()

    async def park(self, entry: StreamEntry, reason: str) -> None:
        """An entry that can never be applied goes to the partition's dead-letter stream
        with the reason, so that it neither blocks the partition nor is lost."""
        await self._redis.xadd(
            keys.dead_letters(self.partition_of[entry.stream]),
            {
                "entry": entry.entry_id,
                "e": entry.raw or b"",
                "reason": reason,
                "consumer": self._consumer,
            },
        )

    async def lag_ms(self) -> int:
        """How far the group's deliveries of events trail the newest, at most over the
        partitions (``consumer_lag_ms``)."""
        lag_ms = 0
        for stream in self.events:
            lag_ms = max(lag_ms, await consumer_lag_ms(self._redis, stream))
        return lag_ms
