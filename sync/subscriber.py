"""The edge side of sync: read the region's stream, apply its messages in order, resume.

``SyncSubscriber.run`` reads ``edge_sync:{region}`` with blocking XREADs (up to ``batch``
entries, ``block_ms`` at most) from its cursor, and applies each message strictly in
stream order; it saves its cursor (``sync.cursor``) in the background, at most every
``save_every_s`` and at every stop, so that saving never holds up a read. Continuity is
checked on every entry and at every (re)start (``sync.gaps``); on a gap it awaits
``on_gap`` *before* applying anything newer, so the edge can drop or revalidate what it
can no longer prove fresh.

Origins read their own control stream with the same subscriber (``origin.control``:
``stream=keys.ORIGINS_SYNC_STREAM``, a cursor in memory); what is said of "the edge"
below holds for them alike.

- **Fresh start.** Without a saved cursor, the edge has nothing cached and nothing to
  revalidate: it starts after the stream's newest entry (read once, so that nothing
  published meanwhile is lost, unlike ``$`` in a loop), without a gap, and saves that
  cursor at once.
- **Once.** Within a process a message is applied once, in order. A cancelled subscriber
  (a killed task) finishes the batch in hand and saves its cursor before the cancellation
  goes through, so its successor on the same cursor neither skips nor repeats a message.
  A killed process loses up to ``save_every_s`` of cursor progress: its successor applies
  those messages again (at least once; applying a sync message twice has the effect of
  applying it once).
- **Malformed entries** are counted, logged once, skipped; the cursor moves past them. A
  sequenced entry whose body is unreadable breaks the chain, so the next entry reports a
  gap: a message the edge could not read is a message it missed.
- **apply raising.** A Redis error (the edge's own store) is retried after a back-off, the
  same message again. Any other error: logged, counted, reported as a gap, skipped.
- **Redis failures** (lost connection, a restarted server): back off with jitter (up to
  ``max_backoff_s``), reconnect, check the stream was not lost, go on where it was. The
  edge serves meanwhile; nothing here raises out of ``run``.

``block_ms`` must stay below the client's socket timeout (redis-py's default: 5 s), and
the client must not decode responses (bodies are msgpack bytes). ``run`` returns within
about ``block_ms`` of ``stop`` being set.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, cast

from redis.exceptions import RedisError

from protocol import keys
from redis_client.client import RedisClient
from resilience.backoff import wait_s
from sync.codec import SEQ_FIELD, decode_entry
from sync.cursor import Cursor, CursorStore
from sync.exceptions import MalformedMessage
from sync.gaps import ORIGIN, Gap, GapKind, Verdict, gap_at_start, parse_id, verdict
from sync.messages import Envelope

log = logging.getLogger(__name__)

# XREAD / XRANGE replies (RESP2, bytes): [(entry id, {field: value}), ...]
Entries = list[tuple[bytes, dict[bytes, bytes]]]
# Errors worth waiting out: the connection, the server, a script or command refused.
TRANSIENT = (RedisError, OSError)


def backoff_s(attempt: int, base_s: float, cap_s: float, draw: float) -> float:
    """Pause before retry number ``attempt`` (0 first): the step doubles up to ``cap_s``,
    and the pause is between half the step and the step ("equal jitter",
    ``resilience.backoff``; ``draw`` in [0, 1)), so that many edges cut off together do not
    all come back in the same instant."""
    return wait_s(attempt, draw, base_s=base_s, cap_s=cap_s, jitter="equal")


@dataclass
class SubscriberStats:
    """Counters for ``/metrics``."""

    applied: int = 0
    malformed: int = 0
    gaps: int = 0
    duplicates: int = 0
    apply_failures: int = 0
    errors: int = 0  # Redis failures met (each followed by a back-off)
    reconnects: int = 0  # successful restarts after one or more failures
    last_seq: int | None = None  # of the last message applied
    # Publish to applied of the last message applied, ms (the clocks of the publisher and
    # the edge both count).
    lag_ms: float | None = None
    # Whether the last read came back with less than a full batch (the edge had caught up).
    caught_up: bool = False
    # Whether the last attempt to read the stream succeeded (False while backing off).
    connected: bool = False


async def _finish_even_if_cancelled(work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` to its end even if the caller is cancelled meanwhile; the cancellation
    goes through after it. Applying and recording what was applied must not be split."""
    task = asyncio.ensure_future(work)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            await asyncio.wait([task])
        if task.done() and not task.cancelled() and task.exception() is not None:
            log.warning("sync batch failed while cancelled: %r", task.exception())
        raise


async def newest_cursor(redis: RedisClient, stream: str) -> Cursor:
    """Right after ``stream``'s newest entry (before the first one, if it is empty): where a
    fresh start reads from. A reader that must not miss what is published while it loads
    its state (an origin loading its catalog) takes it first and starts from it."""
    newest = cast(Entries, await redis.xrevrange(stream, "+", "-", count=1))
    if not newest:
        return Cursor(ORIGIN, 0)
    entry_id, fields = newest[0]
    seq = fields.get(SEQ_FIELD, b"")
    return Cursor(entry_id.decode(), int(seq) if seq.isdigit() else None)


class SyncSubscriber:
    def __init__(
        self,
        redis: RedisClient,
        region: str,
        apply: Callable[[Envelope], Awaitable[None]],
        cursor: CursorStore,
        clock: Callable[[], float],
        *,
        on_gap: Callable[[Gap], Awaitable[None]],
        block_ms: int = 1000,
        batch: int = 500,
        backoff_base_s: float = 0.05,
        max_backoff_s: float = 2.0,
        rng: random.Random | None = None,
        save_every_s: float = 0.1,
        stream: str | None = None,
    ) -> None:
        """``region`` names the subscriber in logs and gaps; ``stream`` is what it reads
        (default: the region's ``edge_sync`` stream; an origin reads the origins' stream,
        ``keys.ORIGINS_SYNC_STREAM``, under the name ``origins``)."""
        if block_ms < 1 or batch < 1:
            raise ValueError(f"block_ms and batch must be >= 1, got {block_ms}, {batch}")
        self._redis = redis
        self.region = region
        self._stream = stream if stream is not None else keys.edge_sync_stream(region)
        self._apply = apply
        self._cursors = cursor
        self._clock = clock
        self._on_gap = on_gap
        self._block_ms = block_ms
        self._batch = batch
        self._backoff_base_s = backoff_base_s
        self._max_backoff_s = max_backoff_s
        self._rng = rng or random.Random()
        self.stats = SubscriberStats()
        self._position: Cursor | None = None  # in memory: what was applied and skipped
        self._saved: Cursor | None = None  # what the cursor store holds
        self._save_every_s = save_every_s
        self._saving: asyncio.Task[None] | None = None  # the cursor save in flight
        self._save_now = asyncio.Event()  # cut the background save's wait short
        self._next_save = 0.0  # event loop time
        self._reported: Cursor | None = None  # where the last gap found at start was

    @property
    def position(self) -> Cursor | None:
        return self._position

    # --- the loop ----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Apply the region's messages until ``stop`` is set; never raises but for
        cancellation."""
        failures = 0
        must_start = True
        try:
            while not stop.is_set():
                try:
                    if must_start:
                        await self.start()
                        must_start = False
                        if failures:
                            self.stats.reconnects += 1
                            log.info("edge_sync %s: reconnected", self.region)
                        failures = 0
                    await self.poll()
                    self.stats.connected = True
                except Exception as exc:
                    self.stats.connected = False
                    self.stats.errors += 1
                    pause = backoff_s(
                        failures, self._backoff_base_s, self._max_backoff_s, self._rng.random()
                    )
                    failures += 1
                    must_start = True
                    if isinstance(exc, TRANSIENT):
                        log.warning("edge_sync %s: %s; again in %.2fs", self.region, exc, pause)
                    else:
                        log.exception("edge_sync %s: again in %.2fs", self.region, pause)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), pause)
        finally:
            with contextlib.suppress(*TRANSIENT):
                await self._flush()

    async def start(self) -> None:
        """Load the cursor (or start afresh), then check the stream was not lost or
        trimmed past it; run at start and after every failure."""
        if self._position is None:
            try:
                stored = await self._cursors.load()
            except MalformedMessage as exc:
                await self._gap(GapKind.CURSOR, Cursor(ORIGIN, None), None, str(exc))
                stored = None
            if stored is None:
                # Kept even if saving it fails: a retry must not move it past messages
                # published meanwhile.
                self._position = await self._fresh_position()
                log.info("edge_sync %s: fresh start at %s", self.region, self._position)
                await self._flush()
            else:
                self._position = self._saved = stored
        first = cast(Entries, await self._redis.xrange(self._stream, "-", "+", count=1))
        first_id = first[0][0].decode() if first else None
        position = self._position
        kind = gap_at_start(position.entry_id, position.seq, first_id)
        if kind is not None and position != self._reported:
            await self._gap(kind, position, None, f"stream's first entry: {first_id}")
            self._reported = position  # a reconnection before the next read: told once
            if kind is GapKind.LOST:
                self._position = Cursor(ORIGIN, None)
            await self._flush()

    async def _fresh_position(self) -> Cursor:
        return await newest_cursor(self._redis, self._stream)

    async def poll(self) -> int:
        """One blocking read and its entries applied (the cursor is saved in the
        background); returns how many entries were read."""
        if self._position is None:
            raise RuntimeError("poll() before start()")
        reply = await self._redis.xread(
            {self._stream: self._position.entry_id}, count=self._batch, block=self._block_ms
        )
        # [(stream, entries)] or nothing when the block ran out
        entries = cast(list[tuple[bytes, Entries]], reply)[0][1] if reply else []
        self.stats.caught_up = len(entries) < self._batch
        if entries:
            await _finish_even_if_cancelled(self._handle(entries))
        return len(entries)

    async def behind_ms(self) -> int:
        """Stream time between the newest entry and the cursor, ms (0: caught up)."""
        if self._position is None:
            return 0
        try:
            info = await self._redis.xinfo_stream(self._stream)
        except RedisError:  # no stream (yet)
            return 0
        newest, _ = parse_id(info["last-generated-id"])
        since, _ = parse_id(self._position.entry_id)
        first = info.get("first-entry")
        if self._position.entry_id == ORIGIN and first:  # nothing read yet
            since, _ = parse_id(first[0])
        return max(0, newest - since)

    # --- one batch ---------------------------------------------------------------------

    async def _handle(self, entries: Entries) -> None:
        for raw_id, fields in entries:
            await self._handle_entry(raw_id.decode(), fields)
        self._save_soon()

    async def _handle_entry(self, entry_id: str, fields: dict[bytes, bytes]) -> None:
        position = self._position
        assert position is not None
        try:
            envelope, prev = decode_entry(fields)
        except MalformedMessage as exc:
            self.stats.malformed += 1
            log.warning("edge_sync %s: entry %s skipped: %s", self.region, entry_id, exc)
            self._position = Cursor(entry_id, position.seq)
            return
        seen = verdict(position.seq, prev, envelope.seq)
        if seen is Verdict.DUPLICATE:
            self.stats.duplicates += 1
            self._position = Cursor(entry_id, position.seq)
            return
        if seen is Verdict.GAP:
            detail = f"entry {entry_id} follows sequence {prev}"
            await self._gap(GapKind.CHAIN, position, envelope.seq, detail)
            # The chain starts again here: if applying fails and this entry is read again,
            # it is no second gap.
            self._position = position = Cursor(position.entry_id, None)
        try:
            await self._apply(envelope)
        except TRANSIENT:
            raise
        except Exception as exc:
            self.stats.apply_failures += 1
            log.exception("edge_sync %s: applying %s failed", self.region, envelope)
            await self._gap(GapKind.UNAPPLIED, position, envelope.seq, repr(exc))
        else:
            self.stats.applied += 1
            self.stats.lag_ms = self._clock() * 1000 - envelope.published_at_ms
        self._position = Cursor(entry_id, envelope.seq)
        self.stats.last_seq = envelope.seq

    async def _gap(
        self, kind: GapKind, position: Cursor, next_seq: int | None, detail: str
    ) -> None:
        gap = Gap(kind, self.region, position.entry_id, position.seq, next_seq, detail)
        log.warning("edge_sync %s: gap (%s) after %s: %s", self.region, kind, position, detail)
        await self._on_gap(gap)
        self.stats.gaps += 1

    def _save_soon(self) -> None:
        """Save the cursor in the background, at most every ``save_every_s``: a save
        awaited after each batch adds a round trip per message while the edge keeps up
        (measured on 2 cores: the median publish-to-applied time doubled), and a save per
        batch doubles the edge's commands. One save at a time, in order; a failed one is
        tried again after the next batch, or by ``_flush``."""
        if self._saving is None or self._saving.done():
            self._saving = asyncio.create_task(self._save_in_background())

    async def _save_in_background(self) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._save_now.wait(), self._next_save - loop.time())
        self._next_save = loop.time() + self._save_every_s
        try:
            await self._save()
        except TRANSIENT as exc:
            log.warning("edge_sync %s: cursor not saved: %s", self.region, exc)

    async def _flush(self) -> None:
        """Save the cursor now, after any save in flight."""
        if self._saving is not None:
            self._save_now.set()
            await asyncio.wait([self._saving])
            self._save_now.clear()
        await self._save()

    async def _save(self) -> None:
        while (position := self._position) is not None and position != self._saved:
            await self._cursors.save(position)
            self._saved = position
