"""The slice's streaming embedding worker: events in, user embeddings out, one at a time.

Reads every ``events:{p}`` partition through the ``embedder`` consumer group, applies
Algorithm 1 per event and acknowledges an entry only after its effect is written. The write
is a compare-and-set on the user's version in one Lua script that also records the
interaction id, so a redelivered event is recognised and a concurrent writer forces a re-read
instead of a lost update. The streaming issue replaces the per-event loop with micro-batches,
tiered freshness and reclaiming of other consumers' pending entries; a restarted worker with
the same consumer name already re-reads its own pending entries first. Entries that can
never be applied go to ``events:{p}:dead`` with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import Counter
from collections.abc import Callable
from enum import StrEnum
from typing import cast

from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from origin.embedding_update import ACTION_WEIGHTS, EmbeddingState, update_embedding
from origin.exceptions import VersionConflict
from protocol import keys
from protocol.events import EVENT_FIELD, FeedbackEvent, decode_event
from protocol.exceptions import MalformedMessage
from protocol.vectors import Vector, pack_vector, unpack_vector

log = logging.getLogger(__name__)

# XREADGROUP's reply (RESP2, bytes): [(stream, [(entry_id, fields or None), ...]), ...]
StreamReply = list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes] | None]]]] | None

# KEYS[1] u:{id}:emb  KEYS[2] u:{id}:mom  KEYS[3] u:{id}:ver  KEYS[4] u:{id}:applied:<ix>
# ARGV[1] embedding bytes  ARGV[2] momentum bytes  ARGV[3] expected version  ARGV[4] mark TTL
# Returns 1 written, 0 version conflict (re-read and retry), -1 already applied.
CAS_WRITE = """
if redis.call('EXISTS', KEYS[4]) == 1 then return -1 end
local version = tonumber(redis.call('GET', KEYS[3]) or '0')
if version ~= tonumber(ARGV[3]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[3], version + 1)
redis.call('SET', KEYS[4], '1', 'EX', ARGV[4])
return 1
"""

MAX_CAS_ATTEMPTS = 10
CAS_BACKOFF_S = 0.0005
MAX_BACKOFF_S = 5.0


class Outcome(StrEnum):
    APPLIED = "applied"
    DUPLICATE = "duplicate"
    NO_CHANGE = "no_change"  # not an embedding action, or nothing to move
    UNKNOWN_ITEM = "unknown_item"  # not in the catalog (of this dimension)
    MALFORMED = "malformed"  # dead-lettered: not an event
    FAILED = "failed"  # dead-lettered: applying it raised


async def ensure_groups(redis: Redis, partitions: int) -> None:
    """Create the consumer group on every partition, from the start of the stream, so that
    events appended before any worker ran are still delivered."""
    for stream in keys.events_streams(partitions):
        try:
            await redis.xgroup_create(stream, keys.EMBEDDER_GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise


class EmbeddingWorker:
    def __init__(
        self,
        redis: Redis,
        *,
        partitions: int,
        dim: int,
        consumer: str,
        clock: Callable[[], float],
        block_ms: int = 1000,
        batch: int = 100,
    ) -> None:
        self._redis = redis
        self._streams = keys.events_streams(partitions)
        self._partition_of = {stream: p for p, stream in enumerate(self._streams)}
        self._partitions = partitions
        self._dim = dim
        self._consumer = consumer
        self._clock = clock
        self._block_ms = block_ms
        self._batch = batch
        self._cas = redis.register_script(CAS_WRITE)
        self.outcomes: Counter[Outcome] = Counter()

    async def run(self, stop: asyncio.Event) -> None:
        """Poll until ``stop`` is set. A Redis failure (lost connection, a consumer group
        gone after a flush) or a run of version conflicts leaves the entry pending; after a
        back-off the worker recreates missing groups and re-reads its pending entries."""
        backoff = 0.1
        recovering = True
        while not stop.is_set():
            try:
                if recovering:
                    await ensure_groups(self._redis, self._partitions)
                    await self.drain_own_pending()
                    recovering = False
                await self.poll(">")
                backoff = 0.1
            except (RedisError, VersionConflict) as exc:
                log.warning("worker %s: %s; retrying in %.1fs", self._consumer, exc, backoff)
                recovering = True
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), backoff)
                backoff = min(MAX_BACKOFF_S, backoff * 2)

    async def drain_own_pending(self) -> None:
        """Entries delivered to this consumer name before a restart and never acknowledged."""
        while await self.poll("0") > 0:
            pass

    async def poll(self, position: str) -> int:
        """Read and apply one batch; returns the number of entries handled."""
        response = cast(
            StreamReply,
            await self._redis.xreadgroup(
                keys.EMBEDDER_GROUP,
                self._consumer,
                dict.fromkeys(self._streams, position),
                count=self._batch,
                block=self._block_ms if position == ">" else None,
            ),
        )
        handled = 0
        for stream, entries in response or []:
            for entry_id, fields in entries:
                handled += 1
                if fields is not None:  # None: a pending entry since deleted from the stream
                    await self._handle(stream, entry_id, fields.get(EVENT_FIELD, b""))
                await self._redis.xack(stream, keys.EMBEDDER_GROUP, entry_id)
        return handled

    async def _handle(self, stream: bytes, entry_id: bytes, raw: bytes) -> None:
        """Apply one entry. One that can never be applied is parked in the partition's
        dead-letter stream with the reason, so that it neither blocks the partition
        (redelivered forever) nor is lost. Redis failures propagate: they are retried."""
        try:
            outcome = await self.apply(decode_event(raw))
        except MalformedMessage as exc:
            outcome, reason = Outcome.MALFORMED, str(exc)
        except (RedisError, VersionConflict):
            raise
        except Exception as exc:  # a bug or a poison entry: park it, keep the partition moving
            log.exception("event %s of %s failed", entry_id, stream)
            outcome, reason = Outcome.FAILED, repr(exc)
        self.outcomes[outcome] += 1
        if outcome in (Outcome.MALFORMED, Outcome.FAILED):
            log.warning("dead-lettering %s of %s: %s", entry_id, stream, reason)
            partition = self._partition_of[stream.decode()]
            await self._redis.xadd(
                keys.dead_letters(partition),
                {"entry": entry_id, "e": raw, "reason": reason, "consumer": self._consumer},
            )

    async def apply(self, event: FeedbackEvent) -> Outcome:
        if event.action not in ACTION_WEIGHTS:
            return Outcome.NO_CHANGE
        raw_item = cast(bytes | None, await self._redis.get(keys.item_vector(event.item_id)))
        if raw_item is None:
            return Outcome.UNKNOWN_ITEM
        try:
            item = unpack_vector(raw_item, self._dim)
        except ValueError:  # the Redis copy of the catalog has another dimension
            return Outcome.UNKNOWN_ITEM
        emb_key = keys.user_embedding(event.user_id)
        mom_key = keys.user_momentum(event.user_id)
        ver_key = keys.user_version(event.user_id)
        mark_key = keys.embedding_applied(event.user_id, event.interaction_id)
        age_hours = max(0.0, self._clock() - event.timestamp_ms / 1000) / 3600
        for attempt in range(MAX_CAS_ATTEMPTS):
            if attempt:
                # Another writer won the last round: step aside for a jittered moment.
                await asyncio.sleep(random.uniform(0, CAS_BACKOFF_S * 2**attempt))
            raw_emb, raw_mom, raw_ver, seen = await self._read(emb_key, mom_key, ver_key, mark_key)
            if seen:
                return Outcome.DUPLICATE
            state = EmbeddingState(
                embedding=self._vector(raw_emb),
                momentum=self._vector(raw_mom),
                version=int(raw_ver or 0),
            )
            new_state = update_embedding(state, item, event.action, age_hours)
            if new_state is None or new_state.embedding is None or new_state.momentum is None:
                return Outcome.NO_CHANGE
            written = await self._cas(
                keys=[emb_key, mom_key, ver_key, mark_key],
                args=[
                    pack_vector(new_state.embedding),
                    pack_vector(new_state.momentum),
                    state.version,
                    keys.EMBED_APPLIED_TTL_S,
                ],
            )
            if written == 1:
                return Outcome.APPLIED
            if written == -1:
                return Outcome.DUPLICATE
        raise VersionConflict(f"user {event.user_id}: {MAX_CAS_ATTEMPTS} conflicts in a row")

    def _vector(self, raw: bytes | None) -> Vector | None:
        """A stored user vector; one of another dimension (the configured dimension changed)
        belongs to another space and is treated as absent, so the update starts afresh."""
        if not raw:
            return None
        try:
            return unpack_vector(raw, self._dim)
        except ValueError:
            return None

    async def _read(
        self, emb_key: str, mom_key: str, ver_key: str, mark_key: str
    ) -> tuple[bytes | None, bytes | None, bytes | None, bool]:
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.get(emb_key)
            pipe.get(mom_key)
            pipe.get(ver_key)
            pipe.exists(mark_key)
            raw_emb, raw_mom, raw_ver, seen = await pipe.execute()
        return raw_emb, raw_mom, raw_ver, bool(seen)
