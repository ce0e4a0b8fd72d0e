"""Publishing sync messages to the ``edge_sync:{region}`` streams (and the origins' stream),
one round trip per call.

One Lua script per publish assigns the next origin sequence numbers and XADDs every
message to every target region's stream, in order, with ``MAXLEN ~ maxlen`` (the edge sync
queue's 100,000, trimmed approximately, which costs almost nothing). Redis runs a script alone,
which gives:

- **Order.** Sequences strictly increase in every stream, also with publishers racing:
  one publish's script runs wholly before or after another's.
- **All or nothing.** The script checks every key's type and value before its first write,
  so a publish lands in every target region or raises ``PublishFailed`` (when the reply is
  lost, which of the two happened is unknown; publishing again is harmless).
- **Sequences never go backwards.** The script starts from the larger of the origin
  sequence and every target stream's last sequence, so a lost or restored sequence key
  cannot hand out a number an edge has already seen in its stream.

A message may go to some regions only, so the sequence numbers in one region's stream have
holes that are no loss. An edge therefore cannot tell a lost message from a jump in ``s``;
each entry also carries ``p``, the sequence of the entry before it in the same stream
(``edge_sync:{region}:last``), and an edge that applied ``N`` expects the next ``p`` to be
``N`` (``sync.gaps``). Sequence and time are stream fields beside the body, not inside it:
the body is msgpack encoded here, and Lua cannot be trusted to rewrite it.

The origins' control stream (``keys.ORIGINS_SYNC_STREAM``, ``origin.control``) is one
more target of the same script, with its own ``:last``: ``publish(..., origins=True)``
adds it to the regions (a ``ModelEpoch``: every edge and every origin), and
``publish_to_origins`` writes it alone (a ``CatalogChange``, which no edge may be sent:
``sync.messages.for_edges``). One sequence numbers both, so an origin checks its stream's
chain exactly as an edge does.

Every key the script touches carries the hash tag ``{sync}`` (``protocol.keys``): on a
Redis Cluster they all live in one slot, so the script runs there as on a single node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from redis.exceptions import RedisError

from protocol import keys
from redis_client.client import RedisClient
from sync.codec import encode_message
from sync.exceptions import PublishFailed
from sync.messages import Message, for_edges

# KEYS[1]                    edge_sync:seq                    the last sequence assigned
# KEYS[2i], KEYS[2i+1]       edge_sync:{r}, edge_sync:{r}:last  per target stream (a
#                            region's, or the origins')
# ARGV[1]                    MAXLEN, approximate
# ARGV[2]                    publish time, ms (stream field t)
# ARGV[3..]                  message bodies in order (stream field m)
# Returns the first sequence assigned; the others follow it one by one. Every read and
# check comes before the first write: a script that fails has written nothing.
PUBLISH = """
local function number_at(key)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then return 0 end
  local value = kind == 'string' and tonumber(redis.call('GET', key)) or nil
  if value == nil then return redis.error_reply('edge_sync: ' .. key .. ' is not a number') end
  return value
end
local base = number_at(KEYS[1])
if type(base) == 'table' then return base end
local prevs = {}
for i = 2, #KEYS, 2 do
  local kind = redis.call('TYPE', KEYS[i])['ok']
  if kind ~= 'none' and kind ~= 'stream' then
    return redis.error_reply('edge_sync: ' .. KEYS[i] .. ' is not a stream')
  end
  local last = number_at(KEYS[i + 1])
  if type(last) == 'table' then return last end
  if last > base then base = last end
  prevs[i] = string.format('%d', last)
end
local n = #ARGV - 2
redis.call('SET', KEYS[1], string.format('%d', base + n))
for i = 2, #KEYS, 2 do
  local prev = prevs[i]
  for j = 1, n do
    local seq = string.format('%d', base + j)
    redis.call('XADD', KEYS[i], 'MAXLEN', '~', ARGV[1], '*',
               's', seq, 'p', prev, 't', ARGV[2], 'm', ARGV[j + 2])
    prev = seq
  end
  redis.call('SET', KEYS[i + 1], prev)
end
return base + 1
"""


class SyncPublisher:
    """``await publisher.publish([InvalidateUser(...)])`` reaches every region's edges."""

    def __init__(
        self,
        redis: RedisClient,
        regions: Sequence[str],
        clock: Callable[[], float],
        maxlen: int = keys.EDGE_SYNC_MAXLEN,
    ) -> None:
        if not regions:
            raise ValueError("a publisher needs at least one region")
        if len(set(regions)) != len(regions):
            raise ValueError(f"regions listed twice: {list(regions)}")
        if maxlen < 1:
            raise ValueError(f"maxlen must be >= 1, got {maxlen}")
        self._redis = redis
        self.regions = tuple(regions)
        self._clock = clock
        self._maxlen = maxlen
        self._script = redis.register_script(PUBLISH)
        self.published = 0  # messages, counted once however many regions they reached

    async def publish(
        self,
        messages: Sequence[Message],
        regions: Sequence[str] | None = None,
        *,
        origins: bool = False,
    ) -> list[int]:
        """Give each message the next origin sequence and append it to the stream of every
        region in ``regions`` (default: all), and with ``origins`` to the origins' stream
        too; returns the sequences, in order. Raises ``PublishFailed`` if Redis did not
        confirm it (then it reached all or none), ValueError for a message no edge may be
        sent (``publish_to_origins`` takes those)."""
        if not messages:
            return []
        targets = self.regions if regions is None else tuple(dict.fromkeys(regions))
        unknown = [r for r in targets if r not in self.regions]
        if unknown or not targets:
            raise ValueError(f"regions {unknown or '[]'} are not among {list(self.regions)}")
        refused = [type(m).__name__ for m in messages if not for_edges(m)]
        if refused:
            raise ValueError(f"{', '.join(refused)}: for the origins' stream only, not regions")
        streams = [(keys.edge_sync_stream(r), keys.edge_sync_last(r)) for r in targets]
        if origins:
            streams.append((keys.ORIGINS_SYNC_STREAM, keys.ORIGINS_SYNC_LAST))
        return await self._append(messages, streams)

    async def publish_to_origins(self, messages: Sequence[Message]) -> list[int]:
        """Append ``messages`` to the origins' stream alone (no edge reads it); raises as
        ``publish``."""
        if not messages:
            return []
        origins = [(keys.ORIGINS_SYNC_STREAM, keys.ORIGINS_SYNC_LAST)]
        # Its own cap. Model epochs reach it under the regions' cap, but they are rare, and
        # the next catalog change trims them with the rest.
        return await self._append(messages, origins, min(self._maxlen, keys.ORIGINS_SYNC_MAXLEN))

    async def _append(
        self,
        messages: Sequence[Message],
        streams: Sequence[tuple[str, str]],
        maxlen: int | None = None,
    ) -> list[int]:
        """One script: the next sequences, each message appended to each (stream, last)."""
        bodies = [encode_message(m) for m in messages]  # refuses what a reader could not read
        script_keys = [keys.EDGE_SYNC_SEQ]
        for stream, last in streams:
            script_keys += [stream, last]
        cap = self._maxlen if maxlen is None else maxlen
        args: list[bytes | int] = [cap, int(self._clock() * 1000), *bodies]
        try:
            first = int(await self._script(keys=script_keys, args=args))
        except RedisError as exc:
            raise PublishFailed(f"publish of {len(messages)} message(s): {exc}") from exc
        self.published += len(messages)
        return list(range(first, first + len(messages)))
