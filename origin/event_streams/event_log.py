"""Feedback intake: validated interactions appended to the user's events partition.

One Lua script per request appends every new interaction and marks it seen, atomically, in
the slot of the partition's stream. It appends *before* marking, so a script cut short can
only leave an event without its mark (a retry appends it again, and the worker's own
interaction-id check absorbs that) and never a mark without its event (a retry would then
be dropped and the interaction lost). The HTTP answer is sent only after the script
returned, i.e. after Redis accepted the writes, and, with ``durability`` asking for
replicas (``PERSO_REDIS_WAIT_REPLICAS``), after that many replicas of the partition's node
confirmed them (``WAIT`` on the same connection, ``redis_client.durable``): a primary that
fails after answering can then not take an acknowledged event with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from protocol import dedup, keys
from protocol.api import FeedbackRequest
from protocol.events import FeedbackEvent, derive_interaction_id, encode_event, epoch_ms
from redis_client.client import RedisClient, RedisPipeline, queue_script
from redis_client.durable import Durability

# KEYS[1]   events:{p}              the partition's stream
# KEYS[2]   events:{p}:accepted      count of events ever appended
# KEYS[3..] events:{p}:seen:<u>:<ix> one dedup mark per interaction, same order as ARGV[2..]
# ARGV[1]   dedup TTL in seconds
# ARGV[2..] msgpack-encoded events
# Returns the number of events appended (the rest were already seen).
APPEND_NEW = """
local appended = 0
for i = 3, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    redis.call('XADD', KEYS[1], '*', 'e', ARGV[i - 1])
    redis.call('SET', KEYS[i], '1', 'EX', ARGV[1])
    appended = appended + 1
  end
end
if appended > 0 then redis.call('INCRBY', KEYS[2], appended) end
return appended
"""


def to_events(request: FeedbackRequest, now_ms: int) -> list[FeedbackEvent]:
    events = []
    for item in request.feedback:
        client_ms = epoch_ms(item.timestamp) if item.timestamp else None
        interaction_id = item.interaction_id or derive_interaction_id(
            request.user_id,
            item.item_id,
            item.action.value,
            session_id=request.session_id,
            request_id=request.request_id,
            timestamp_ms=client_ms,
        )
        events.append(
            FeedbackEvent(
                interaction_id=interaction_id,
                user_id=request.user_id,
                item_id=item.item_id,
                action=item.action.value,
                timestamp_ms=client_ms if client_ms is not None else now_ms,
                accepted_ms=now_ms,
                session_id=request.session_id,
                request_id=request.request_id,
                position=item.position,
                duration_ms=item.duration_ms,
                reward_override=item.reward_override,
            )
        )
    return events


class FeedbackLog:
    """Appends feedback to ``events:{partition}``; ``record`` returns once Redis has it."""

    def __init__(
        self,
        redis: RedisClient,
        *,
        partitions: int,
        dedup_ttl_s: int,
        clock: Callable[[], float],
        durability: Durability = Durability(),  # noqa: B008 - frozen
    ) -> None:
        self._redis = redis
        self._partitions = partitions
        self._dedup_ttl_s = dedup_ttl_s
        self._clock = clock
        self.durability = durability
        self._append = redis.register_script(APPEND_NEW)

    async def record(self, request: FeedbackRequest) -> int:
        """Append the request's new interactions; returns how many were new."""
        return await self.append(request.user_id, self.events_of(request))

    def events_of(self, request: FeedbackRequest) -> list[FeedbackEvent]:
        return to_events(request, int(self._clock() * 1000))

    async def append(self, user_id: str, events: Sequence[FeedbackEvent]) -> int:
        """Append and, if the durability asks for it, wait for the replicas (raising
        ``NotReplicated`` when too few confirmed); returns how many events were new."""
        async with self._redis.pipeline(transaction=False) as pipe:
            await self.queue_append(pipe, user_id, events)
            waits = self.queue_replication(pipe, user_id)
            replies = await pipe.execute()
        if waits:
            self.durability.check(replies[-1])
        return int(replies[0])

    def queue_replication(self, pipe: RedisPipeline, user_id: str) -> bool:
        """Queue ``WAIT`` for the replicas of the user's partition after the appends
        queued on ``pipe`` (its reply last); False when no replica is required."""
        stream = keys.events_stream(keys.partition_of(user_id, self._partitions))
        return self.durability.queue_wait(pipe, self._redis, stream)

    async def queue_append(
        self, pipe: RedisPipeline, user_id: str, events: Sequence[FeedbackEvent]
    ) -> None:
        """Queue the append on ``pipe``; its reply is the number of events appended."""
        script_keys, args = self._script_call(user_id, events)
        await queue_script(pipe, self._append, script_keys, args)

    def _script_call(
        self, user_id: str, events: Sequence[FeedbackEvent]
    ) -> tuple[list[str], list[bytes | int]]:
        partition = keys.partition_of(user_id, self._partitions)
        script_keys = [keys.events_stream(partition), keys.events_accepted(partition)]
        script_keys += [dedup.feedback_seen(partition, user_id, e.interaction_id) for e in events]
        args: list[bytes | int] = [self._dedup_ttl_s, *(encode_event(e) for e in events)]
        return script_keys, args
