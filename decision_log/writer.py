"""Appending decisions (``protocol.decisions``) to the decision log, off the request path.

Edges and origins serve answers; each answer is a decision that the stream workers join to
its rewards and that offline evaluation reads. Serving must not wait for it: ``log`` puts
a closure that builds the record into a bounded buffer (O(1); the record is built and
encoded later, outside the request), and ``run`` flushes the buffer every
``flush_every_s`` in pipelined batches: one ``XADD`` per partition of ``decisions:{p}``
carrying that partition's records of the batch (``protocol.decisions.encode_batch``; a
lone record as itself). One command per answer cost an edge's hit path about 70 µs of CPU
(``benchmarks.edge_hit``); one per partition and flush costs a few.

Retention: the workers' elected trimmer keeps every log to its age and size
(``origin.worker.retention``). The decision log is read by the workers' consumer group, so
only that trimmer trims it, never past what the group still needs; the logs beside it
(contexts, shadow), read by range only, are also trimmed here as they are appended to
(``MINID ~`` by age, ``MAXLEN ~`` by entries).

Best effort, and said so: when Redis cannot take them, decisions wait in the buffer, and
beyond ``max_buffer`` the oldest are dropped and counted (``dropped``); a process that dies
loses what it had not flushed (at most one flush period). A lost decision costs the
learning loop the non-engagements of one answer; the engagements still arrive as feedback.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from redis.exceptions import RedisError

from config.settings import Settings
from protocol import keys
from protocol.decisions import (
    DECISION_FIELD,
    Decision,
    EncodedDecision,
    encode_batch,
    encode_decision,
)
from protocol.shadows import ShadowDecision, encode_shadow
from redis_client.client import RedisClient

log = logging.getLogger(__name__)

FLUSH_EVERY_S = 0.1
BATCH = 500
MAX_BUFFER = 20_000


@dataclass
class DecisionCounters:
    logged: int = 0  # handed to the log
    written: int = 0  # in Redis
    dropped: int = 0  # buffer full: the oldest given up
    failed_flushes: int = 0


@dataclass(frozen=True)
class Retention:
    """How long and how many entries a partition of a log keeps."""

    seconds: float = 7 * 86_400.0  # the event log's retention: seven days
    entries: int = 200_000


class DecisionLog:
    def __init__(
        self,
        redis: RedisClient,
        *,
        partitions: int,
        clock: Callable[[], float],
        retention: Retention | None = None,
        flush_every_s: float = FLUSH_EVERY_S,
        max_buffer: int = MAX_BUFFER,
        stream: Callable[[int], str] = keys.decisions_stream,
    ) -> None:
        """``stream``: a partition's stream (the context log, ``protocol.contexts``,
        is written by the same code to ``contexts:{p}``); ``retention``: trimmed to it on
        each append (None: only by the workers' trimmer)."""
        self._redis = redis
        self._stream = stream
        self._partitions = partitions
        self._clock = clock
        self._retention = retention
        self._flush_every_s = flush_every_s
        self._buffer: deque[Callable[[], Decision | EncodedDecision]] = deque()
        self._max_buffer = max_buffer
        self._flushing = asyncio.Lock()
        self.counters = DecisionCounters()

    def __len__(self) -> int:
        return len(self._buffer)

    def log(self, decision: Callable[[], Decision | EncodedDecision]) -> None:
        """Buffer the decision ``decision()`` will build (a record, or one already encoded);
        never blocks, never raises."""
        self.counters.logged += 1
        self._buffer.append(decision)
        if len(self._buffer) > self._max_buffer:
            self._buffer.popleft()
            self.counters.dropped += 1

    async def run(self, stop: asyncio.Event) -> None:
        """Flush every ``flush_every_s`` until ``stop``, then once more."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._flush_every_s)
            await self.flush()
        await self.flush()

    async def flush(self) -> int:
        """Write what is buffered, in batches; returns how many were written. On a Redis
        failure the batch goes back to the front of the buffer for the next flush.

        One flush at a time (a caller's flush waits for the background one in flight): two
        pipelines in flight at once could land a later batch before an earlier one, and a
        failed batch put back while another flush runs would be written after newer ones."""
        async with self._flushing:
            return await self._flush()

    async def _flush(self) -> int:
        written = 0
        while self._buffer:
            batch = [self._buffer.popleft() for _ in range(min(BATCH, len(self._buffer)))]
            records: list[Decision | EncodedDecision] = []
            for make in batch:
                try:
                    records.append(make())
                except Exception:  # a bug building one record must not lose the others
                    log.exception("a decision could not be built; skipped")
            try:
                await self._write(records)
            except (RedisError, OSError) as exc:
                self.counters.failed_flushes += 1
                log.warning(
                    "%d decisions not written, kept for the next flush: %s", len(batch), exc
                )
                self._buffer.extendleft(reversed(batch))
                while len(self._buffer) > self._max_buffer:
                    self._buffer.popleft()
                    self.counters.dropped += 1
                return written
            written += len(records)
            self.counters.written += len(records)
        return written

    async def _write(self, records: list[Decision | EncodedDecision]) -> None:
        """One entry per partition: the partition's records of this batch, together."""
        retention = self._retention
        by_stream: dict[str, list[bytes]] = {}
        for d in records:
            stream = self._stream(keys.partition_of(d.user_id, self._partitions))
            payload = d.payload if isinstance(d, EncodedDecision) else encode_decision(d)
            by_stream.setdefault(stream, []).append(payload)
        async with self._redis.pipeline(transaction=False) as pipe:
            for stream in sorted(by_stream):
                encoded = by_stream[stream]
                pipe.xadd(
                    stream,
                    {DECISION_FIELD: encoded[0] if len(encoded) == 1 else encode_batch(encoded)},
                    maxlen=retention.entries if retention is not None else None,
                    approximate=True,
                )
                if retention is not None:
                    min_id = max(0, int((self._clock() - retention.seconds) * 1000))
                    pipe.xtrim(stream, minid=f"{min_id}-0", approximate=True)
            await pipe.execute()


def shadow_writer(shadow_log: DecisionLog) -> Callable[[ShadowDecision], None]:
    """What a shadow runner (``evaluation.shadow``) hands its records to: ``shadow_log``,
    a log of ``keys.shadow_stream``."""

    def write(record: ShadowDecision) -> None:
        shadow_log.log(functools.partial(EncodedDecision, record.user_id, encode_shadow(record)))

    return write


def configured_log(
    settings: Settings,
    redis: RedisClient,
    clock: Callable[[], float],
    stream: Callable[[int], str] = keys.decisions_stream,
) -> DecisionLog:
    """The decision log, or a log beside it (``stream``: its partitions), as ``settings``
    configure it: their partitions and the retention ``PERSO_DECISION_RETENTION_*``. The
    decision log itself is left to the workers' trimmer: trimmed here, a backlog the
    workers have not read yet would go (``origin.worker.retention``, the safety floor)."""
    retention = Retention(settings.decision_retention_s, settings.decision_retention_entries)
    return DecisionLog(
        redis,
        partitions=settings.event_partitions,
        clock=clock,
        retention=None if stream is keys.decisions_stream else retention,
        stream=stream,
    )
