"""The entry store in a PoP-local Redis, shared by the edge processes of one PoP.

Layout (``protocol.edge_entry_keys.EdgeEntryKeys``, the only place that spells these
names), for prefix ``p``, epoch ``E``, cache key ``k`` and tag ``t``:

- ``p epoch``: hash ``{id: E, floor: G}``, the epoch pointer; no TTL. Absent: epoch 0.
- ``p epochs``: counter giving new epoch ids; no TTL.
- ``p eE:{k}:A``, ``p eE:{k}:B``: the two buffers of ``k``, an encoded entry each
  (``edge.cache.codec``), expiring at that entry's ``stale_until``.
- ``p eE:{k}:active``: hash ``{buffer: A|B, generation: G}``, expiring with the active
  buffer.
- ``p eE:{k}:tags``: set of the active entry's tags, expiring with it.
- ``p eE:tag:{t}``: set of the keys whose active entry has tag ``t``, expiring with the
  last of them.

Every script reads the epoch pointer beside a key's buffers, and put, delete and
delete_tag move keys between tag sets, so the whole store shares one hash tag, the prefix's
(``keys.edge_entry_prefix``: the region): on a Redis Cluster a PoP's store is one slot,
on one shard, and every script (the double-buffered flip among them) runs there as on a
single node.

A put is one script: check the epoch, refuse a generation not greater than the active
entry's (or the epoch's floor), write the standby buffer, flip the pointer, move the key
in the tag index. A get is one script: the epoch, the pointer and the buffer it names,
read together, so a reader never follows the pointer to a buffer not yet written.
``swap_all`` writes a whole new epoch namespace, which no reader looks at, then flips the
epoch pointer in one command; the old namespace is then unlinked (and would expire anyway).

A store that cannot be reached degrades the answers, never fails them: a read is a miss
(the edge fills from its origin) and a write is not kept (``failures`` counts both, in
``/metrics``); purges and swaps raise, so that the sync applier tries them again.

Key names are built here with the epoch the store last saw; a script finds the epoch moved
(another process swapped) and answers so, and the call is made again with the new one.
Generations are compared in Lua as fixed-width strings: Lua numbers are doubles, exact
only up to 2**53.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from redis.exceptions import RedisError

from edge.cache.codec import decode_entry, encode_entry
from edge.cache.entry import Entry
from edge.cache.key import CacheKey
from edge.cache.store import Generations, admit
from protocol.edge_entry_keys import ENTRY_SUFFIXES, EdgeEntryKeys
from redis_client.client import RedisClient, decodes_responses

log = logging.getLogger(__name__)

# How often a call is tried again because the epoch moved under it: each retry means
# another process swapped or cleared meanwhile, which happens a few times a day.
EPOCH_ATTEMPTS = 8
# Commands per pipeline round trip when building an epoch, keys per UNLINK when dropping one.
BATCH = 1000

PING_TIMEOUT_S = 1.0
# What a store that cannot be reached raises (a refused or cut connection, a timeout).
UNREACHABLE = (RedisError, OSError, TimeoutError)

_MOVED = -1
_INT64 = 2**63


def ordered(generation: int) -> str:
    """``generation`` as a string that sorts like the number (Lua compares these)."""
    if not -_INT64 <= generation < _INT64:
        raise ValueError(f"generation {generation} is outside the 64-bit range")
    return f"{generation + _INT64:020d}"


def expiry_ms(at: float) -> int:
    """An absolute time in seconds as PEXPIREAT's milliseconds, not before it."""
    return math.ceil(at * 1000)


def _text(reply: bytes | str) -> str:
    return reply.decode() if isinstance(reply, bytes) else reply


def glob_escaped(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


class RedisEntryStore:
    """``EntryStore`` over a standalone Redis (a client with ``decode_responses=False``)."""

    # KEYS[1] epoch pointer   KEYS[2] buffer A   KEYS[3] buffer B   KEYS[4] active pointer
    # ARGV[1] the epoch the keys were built for
    # Returns {-1, epoch} when the epoch moved, {0} when there is no entry, {1, entry}.
    GET = """
local epoch = redis.call('HGET', KEYS[1], 'id') or '0'
if epoch ~= ARGV[1] then return {-1, epoch} end
local buffer = redis.call('HGET', KEYS[4], 'buffer')
if not buffer then return {0} end
local name = KEYS[2]
if buffer == 'B' then name = KEYS[3] end
local entry = redis.call('GET', name)
if not entry then return {0} end
return {1, entry}
"""

    # KEYS[1] epoch pointer   KEYS[2] buffer A   KEYS[3] buffer B   KEYS[4] active pointer
    # KEYS[5] the key's tag set   KEYS[6..] tag index sets of the entry's tags
    # ARGV[1] epoch   ARGV[2] ordered generation   ARGV[3] encoded entry
    # ARGV[4] stale_until ms   ARGV[5] cache key   ARGV[6] tag index head   ARGV[7] tail
    # ARGV[8..] the entry's tags (in the order of KEYS[6..])
    # Returns {-1, epoch} when the epoch moved, {0} refused, {1} flipped.
    PUT = """
local pointer = redis.call('HMGET', KEYS[1], 'id', 'floor')
local epoch = pointer[1] or '0'
if epoch ~= ARGV[1] then return {-1, epoch} end
local generation = ARGV[2]
if pointer[2] and generation <= pointer[2] then return {0} end
local active = redis.call('HMGET', KEYS[4], 'buffer', 'generation')
if active[1] and generation <= active[2] then return {0} end
local standby, name = 'B', KEYS[3]
if active[1] == 'B' then standby, name = 'A', KEYS[2] end
redis.call('SET', name, ARGV[3])
redis.call('PEXPIREAT', name, ARGV[4])
redis.call('HSET', KEYS[4], 'buffer', standby, 'generation', generation)
redis.call('PEXPIREAT', KEYS[4], ARGV[4])
for _, tag in ipairs(redis.call('SMEMBERS', KEYS[5])) do
  redis.call('SREM', ARGV[6] .. tag .. ARGV[7], ARGV[5])
end
redis.call('DEL', KEYS[5])
if #KEYS > 5 then
  redis.call('SADD', KEYS[5], unpack(ARGV, 8))
  redis.call('PEXPIREAT', KEYS[5], ARGV[4])
  local time = redis.call('TIME')
  local now = time[1] * 1000 + math.floor(time[2] / 1000)
  local at = tonumber(ARGV[4])
  for i = 6, #KEYS do
    redis.call('SADD', KEYS[i], ARGV[5])
    local ttl = redis.call('PTTL', KEYS[i])
    if ttl < 0 or now + ttl < at then redis.call('PEXPIREAT', KEYS[i], ARGV[4]) end
  end
end
return {1}
"""

    # KEYS[1] epoch pointer   KEYS[2] buffer A   KEYS[3] buffer B   KEYS[4] active pointer
    # KEYS[5] the key's tag set
    # ARGV[1] epoch   ARGV[2] cache key   ARGV[3] tag index head   ARGV[4] tail
    # Returns {-1, epoch} when the epoch moved, else {1, whether an entry was there}.
    DELETE = """
local epoch = redis.call('HGET', KEYS[1], 'id') or '0'
if epoch ~= ARGV[1] then return {-1, epoch} end
local existed = redis.call('EXISTS', KEYS[4])
for _, tag in ipairs(redis.call('SMEMBERS', KEYS[5])) do
  redis.call('SREM', ARGV[3] .. tag .. ARGV[4], ARGV[2])
end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
return {1, existed}
"""

    # KEYS[1] epoch pointer   KEYS[2] tag index set of the tag
    # ARGV[1] epoch   ARGV[2] slot head   ARGV[3..6] suffixes of A, B, active, tag set
    # ARGV[7] tag index head   ARGV[8] tail   ARGV[9] the tag
    # Returns {-1, epoch} when the epoch moved, else {1, entries deleted}.
    # A key stays listed under a tag when its entry expired while the set lived on (a put
    # cleans only the tags of a live entry), so a key whose own entry does not have the tag
    # is only taken off the list.
    DELETE_TAG = """
local epoch = redis.call('HGET', KEYS[1], 'id') or '0'
if epoch ~= ARGV[1] then return {-1, epoch} end
local deleted = 0
for _, key in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local head = ARGV[2] .. key
  local tags = head .. ARGV[6]
  if redis.call('SISMEMBER', tags, ARGV[9]) == 1 then
    deleted = deleted + redis.call('EXISTS', head .. ARGV[5])
    for _, tag in ipairs(redis.call('SMEMBERS', tags)) do
      redis.call('SREM', ARGV[7] .. tag .. ARGV[8], key)
    end
    redis.call('DEL', head .. ARGV[3], head .. ARGV[4], head .. ARGV[5], tags)
  end
end
redis.call('DEL', KEYS[2])
return {1, deleted}
"""

    # KEYS[1] epoch pointer   ARGV[1] new epoch id   ARGV[2] ordered floor generation
    # Returns {1, previous epoch} when flipped, {0, current epoch} when a newer one is there.
    FLIP = """
local current = redis.call('HMGET', KEYS[1], 'id', 'floor')
local epoch = current[1] or '0'
if tonumber(epoch) >= tonumber(ARGV[1]) then return {0, epoch} end
local floor = ARGV[2]
if current[2] and current[2] > floor then floor = current[2] end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'floor', floor)
return {1, epoch}
"""

    def __init__(
        self, redis: RedisClient, prefix: str, *, generations: Callable[[], int] | None = None
    ) -> None:
        if decodes_responses(redis):
            raise ValueError("RedisEntryStore needs a client with decode_responses=False")
        self._redis = redis
        self._keys = EdgeEntryKeys(prefix)
        self._generations = generations or Generations()
        # The epoch the last reply named; a wrong guess costs one more round trip.
        self._epoch = "0"
        self.failures = 0  # reads and writes the store failed (a miss, an entry not kept)
        self._get = redis.register_script(self.GET)
        self._put = redis.register_script(self.PUT)
        self._delete = redis.register_script(self.DELETE)
        self._delete_tag = redis.register_script(self.DELETE_TAG)
        self._flip = redis.register_script(self.FLIP)

    def __repr__(self) -> str:
        return f"RedisEntryStore(prefix={self._keys.prefix!r})"

    def next_generation(self) -> int:
        return self._generations()

    async def get(self, key: CacheKey) -> Entry | None:
        def attempt(epoch: str) -> Awaitable[Any]:
            a, b, active, _ = self._keys.slot(epoch, key.digest)
            return self._get(keys=[self._keys.epoch, a, b, active], args=[epoch])

        try:
            reply = await self._in_epoch(attempt)
        except UNREACHABLE as exc:
            self._failed("read", exc)
            return None
        if reply[0] == 0:
            return None
        try:
            entry = decode_entry(reply[1])
        except ValueError as exc:
            # Another release's format, or damage: a miss, and the next fill replaces it.
            log.warning("unreadable entry under %r treated as absent: %s", key.digest, exc)
            return None
        if entry.audience != key.audience:
            # Only a writer that skipped ``admit`` could have put it there: never serve it.
            log.error("entry under %r is for another audience; treated as absent", key.digest)
            return None
        return entry

    async def put(self, key: CacheKey, entry: Entry) -> bool:
        admit(key, entry)
        generation = ordered(entry.generation)
        encoded = encode_entry(entry)
        at = expiry_ms(entry.stale_until)
        tags = list(dict.fromkeys(entry.tags))

        def attempt(epoch: str) -> Awaitable[Any]:
            keys = [self._keys.epoch, *self._keys.slot(epoch, key.digest)]
            keys += [self._keys.tag(epoch, tag) for tag in tags]
            head = self._keys.tag_head(epoch)
            args: list[str | bytes | int] = [epoch, generation, encoded, at, key.digest, head]
            args += [EdgeEntryKeys.TAG_TAIL, *tags]
            return self._put(keys=keys, args=args)

        try:
            reply = await self._in_epoch(attempt)
        except UNREACHABLE as exc:
            self._failed("write", exc)
            return False
        return bool(reply[0] == 1)

    def _failed(self, what: str, exc: BaseException) -> None:
        # Logged at the first failure and then every 1,000th: an outage of the store is one
        # line per thousand requests, not one each.
        if self.failures % 1000 == 0:
            log.warning("PoP store %s failed (%d so far): %r", what, self.failures + 1, exc)
        self.failures += 1

    async def swap_all(self, entries: Mapping[CacheKey, Entry]) -> None:
        for key, entry in entries.items():
            admit(key, entry)
        epoch = str(await self._redis.incr(self._keys.epochs))
        await self._write_namespace(epoch, entries)
        await self._flip_to(epoch)

    async def delete(self, digest: str) -> bool:
        def attempt(epoch: str) -> Awaitable[Any]:
            keys = [self._keys.epoch, *self._keys.slot(epoch, digest)]
            args = [epoch, digest, self._keys.tag_head(epoch), EdgeEntryKeys.TAG_TAIL]
            return self._delete(keys=keys, args=args)

        reply = await self._in_epoch(attempt)
        return bool(reply[1] == 1)

    async def delete_tag(self, tag: str) -> int:
        def attempt(epoch: str) -> Awaitable[Any]:
            keys = [self._keys.epoch, self._keys.tag(epoch, tag)]
            head = self._keys.slot_head(epoch)
            args = [
                epoch,
                head,
                *ENTRY_SUFFIXES,
                self._keys.tag_head(epoch),
                EdgeEntryKeys.TAG_TAIL,
                tag,
            ]
            return self._delete_tag(keys=keys, args=args)

        reply = await self._in_epoch(attempt)
        return int(reply[1])

    async def clear(self) -> None:
        await self._flip_to(str(await self._redis.incr(self._keys.epochs)))

    async def ping(self) -> bool:
        try:
            return bool(await asyncio.wait_for(self._redis.ping(), PING_TIMEOUT_S))
        except UNREACHABLE:
            return False

    async def size(self) -> int:
        """Counted by a SCAN of the current epoch (O(keys in the database)): for readiness
        and metrics, not for a request path."""
        epoch = await self._redis.hget(self._keys.epoch, "id")
        head = self._keys.slot_head(_text(epoch) if epoch is not None else "0")
        match = glob_escaped(head) + "*" + glob_escaped(ENTRY_SUFFIXES[2])
        count = 0
        async for _ in self._redis.scan_iter(match=match, count=BATCH):
            count += 1
        return count

    async def _in_epoch(self, attempt: Callable[[str], Awaitable[Any]]) -> Sequence[Any]:
        """``attempt`` with the keys of the current epoch, again while the epoch moves."""
        for _ in range(EPOCH_ATTEMPTS):
            epoch = self._epoch
            reply: Sequence[Any] = await attempt(epoch)
            if reply[0] != _MOVED:
                return reply
            self._epoch = _text(reply[1])
        raise RuntimeError(f"the epoch of {self._keys.prefix!r} kept moving")

    async def _write_namespace(self, epoch: str, entries: Mapping[CacheKey, Entry]) -> None:
        """Write ``entries`` as the whole table of ``epoch``, which no reader looks at until
        the pointer is flipped to it."""
        tag_expiry: dict[str, int] = {}
        async with self._redis.pipeline(transaction=False) as pipe:
            for n, (cache_key, entry) in enumerate(entries.items(), start=1):
                key = cache_key.digest
                a, _, active, tag_set = self._keys.slot(epoch, key)
                at = expiry_ms(entry.stale_until)
                pipe.set(a, encode_entry(entry))
                pipe.pexpireat(a, at)
                pipe.hset(active, mapping={"buffer": "A", "generation": ordered(entry.generation)})
                pipe.pexpireat(active, at)
                if entry.tags:
                    pipe.sadd(tag_set, *entry.tags)
                    pipe.pexpireat(tag_set, at)
                for tag in entry.tags:
                    tag_set = self._keys.tag(epoch, tag)
                    tag_expiry[tag] = max(tag_expiry.get(tag, 0), at)
                    pipe.sadd(tag_set, key)
                    # Each time, not once at the end: nothing of a swap cut short outlives
                    # its entries.
                    pipe.pexpireat(tag_set, tag_expiry[tag])
                if n % (BATCH // 8) == 0:
                    await pipe.execute()
            await pipe.execute()

    async def _flip_to(self, epoch: str) -> None:
        floor = ordered(self.next_generation())
        flipped, other = await self._flip(keys=[self._keys.epoch], args=[epoch, floor])
        if flipped:
            self._epoch = epoch
            await self._unlink_namespace(_text(other))
        else:
            # A swap or clear that started later flipped first: ours is never read.
            self._epoch = _text(other)
            await self._unlink_namespace(epoch)

    async def _unlink_namespace(self, epoch: str) -> None:
        match = glob_escaped(self._keys.namespace(epoch)) + "*"
        batch: list[bytes | str] = []
        async for name in self._redis.scan_iter(match=match, count=BATCH):
            batch.append(name)
            if len(batch) == BATCH:
                await self._redis.unlink(*batch)
                batch = []
        if batch:
            await self._redis.unlink(*batch)
