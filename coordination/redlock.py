"""Redlock: the lock of ``coordination.lock.Lock`` over N independent Redis nodes.

A grant asks every node at once for ``SET NX PX`` (``RedisLock.GRANT``), each call bounded by
a per-node timeout much shorter than the TTL, and measures the time the round took on a
monotonic clock (antirez's Redlock). It holds only when a
majority (``N // 2 + 1``) granted and time is left: ``validity = ttl - elapsed - drift``
with ``drift = ttl * 0.01 + 2 ms`` for the nodes' clocks running at different rates.
Otherwise the attempt is released on every node that did not plainly refuse, those that
failed or timed out included: a node may have applied a grant whose reply was lost. Release
and extend go to every node; an extension holds when a majority extended and the new TTL's
validity is positive.
``is_locked`` and ``info`` are a majority's view: the token held by a majority of all N
nodes, the least TTL left among them.

A node that refuses a connection, errs or times out counts as a failed vote and the caller
sees no exception, except from ``is_locked`` and ``info``: they raise ``QuorumUnreachable``
when fewer than a majority answered, since "free" would be a guess. ``release`` never raises
(it runs in ``finally`` blocks); it returns True only when a majority confirmed, and what an
unreachable node still holds lapses with its TTL, as does what a cancelled grant had set.

Fencing tokens. Each node keeps its own counter (``RedisLock.GRANT`` increments it with
the grant), so after failures the counters differ. The grant's token is ``M``, the largest
counter the granting majority returned, and the grant keeps the invariant "every node of
a granting majority has counter >= M while it holds the lock":

* all granting nodes returned ``M``: it holds already;
* they differ: ``M`` is written back (``WRITE_BACK``: counter = max(counter, M), only where
  the lock still holds our token) and the grant stands only if a majority confirmed.

A later grant needs a majority too, which shares a node with ours; that node granted it
after our lock left it, so after the write-back, and its INCR returns more than ``M``:
tokens increase with the order of grants.

Limits (Kleppmann, "How to do distributed locking"; antirez, "Is Redlock safe?"):

* a node restarted without its data forgets the lock and the counter, so two clients can
  hold a majority at once and tokens can repeat. Run nodes with ``appendfsync always``, or
  keep a restarted node out for longer than the largest TTL (antirez's delayed restart);
* the nodes' clocks must advance at nearly the same rate (the drift allowance is 1 %), and
  Redis keeps expiries as wall-clock times: a node whose clock is stepped forward (NTP
  stepping rather than slewing) expires the lock early;
* a holder paused past its lease still believes it holds it: write through a fenced store
  (``coordination.fencing``).

Give each node a client without retries (``retry=Retry(NoBackoff(), 0)``): a dead node must
fail its vote within the per-node timeout, not after the client's backoff.
"""

from __future__ import annotations

import asyncio
import random
import secrets
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from redis.exceptions import RedisError

from coordination.exceptions import QuorumUnreachable
from coordination.lock import Lease, LockInfo, acquire_with_retry
from coordination.redis_lock import RedisLock
from coordination.retry import DEFAULT, RetryPolicy
from protocol import keys
from redis_client.client import RedisClient

# antirez's clock drift allowance: 1 % of the TTL plus 2 ms for the nodes' timer resolution.
DRIFT_FACTOR = 0.01
DRIFT_FLOOR_MS = 2.0


def quorum(nodes: int) -> int:
    """The votes a grant needs: a strict majority, so that two grants share a node."""
    return nodes // 2 + 1


def drift_ms(ttl_ms: int) -> float:
    """antirez's clock drift allowance for a lease of ``ttl_ms``: 1 % of it plus 2 ms of timer
    resolution, taken off every grant's validity."""
    return ttl_ms * DRIFT_FACTOR + DRIFT_FLOOR_MS


def validity_ms(ttl_ms: int, elapsed_ms: float) -> float:
    """How long a lease of ``ttl_ms`` stays safely held after a grant that took
    ``elapsed_ms``; the grant stands only if this is positive."""
    return ttl_ms - elapsed_ms - drift_ms(ttl_ms)


def granted(votes: int, nodes: int, validity: float) -> bool:
    """Whether a round stands: a majority of ``nodes`` voted (``quorum``) and ``validity`` ms
    are left; the test of both grants and extensions."""
    return votes >= quorum(nodes) and validity > 0


def fencing_of(counters: Sequence[int]) -> tuple[int, bool]:
    """The grant's fencing token from the granting nodes' counters, and whether it must be
    written back to them (they differ: a node missed grants while down, or was restarted)."""
    if not counters:
        raise ValueError("a grant needs at least one granting node")
    highest = max(counters)
    return highest, min(counters) != highest


NodeView = tuple[str, int, int]  # a node's holder token, its TTL left in ms, its counter


def majority_holder(resource: str, views: Sequence[NodeView | None], nodes: int) -> LockInfo | None:
    """The holder seen by a majority of all ``nodes`` (``views``: what each node that
    answered holds, None when free), or None when no token has a majority.

    Its fencing token is the largest counter among the nodes holding it: the write-back
    left a majority at the grant's token, and a majority of the holding nodes meets it.
    """
    by_token: dict[str, list[NodeView]] = {}
    for view in views:
        if view is not None:
            by_token.setdefault(view[0], []).append(view)
    for token, held in by_token.items():
        if len(held) >= quorum(nodes):
            remaining = min(view[1] for view in held)
            return LockInfo(resource, token, max(view[2] for view in held), remaining)
    return None


class Redlock:
    """Leases held by a majority of ``nodes``; ``clock`` (monotonic, seconds) times each
    grant and stamps ``Lease.acquired_at``; every node call is bounded by ``node_timeout_s``,
    which should be a small fraction of the TTLs used."""

    # KEYS[1] lock, KEYS[2] fencing counter; ARGV[1] token, ARGV[2] the grant's fencing token.
    # Returns 1 if the lock still holds the token (the counter is now at least ARGV[2]), else 0.
    WRITE_BACK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    if tonumber(redis.call('GET', KEYS[2]) or '0') < tonumber(ARGV[2]) then
        redis.call('SET', KEYS[2], ARGV[2])
    end
    return 1
end
return 0
"""

    def __init__(
        self,
        nodes: Sequence[RedisClient],
        clock: Callable[[], float],
        *,
        rng: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        node_timeout_s: float = 0.05,
    ) -> None:
        if not nodes:
            raise ValueError("Redlock needs at least one node")
        if node_timeout_s <= 0:
            raise ValueError("the per-node timeout must be positive")
        self._clock = clock
        self._rng = rng if rng is not None else random.Random().random
        self._sleep = sleep
        self._timeout_s = node_timeout_s
        self._n = len(nodes)
        self._grant = [node.register_script(RedisLock.GRANT) for node in nodes]
        self._release = [node.register_script(RedisLock.RELEASE) for node in nodes]
        self._extend = [node.register_script(RedisLock.EXTEND) for node in nodes]
        self._info = [node.register_script(RedisLock.INFO) for node in nodes]
        self._write_back = [node.register_script(self.WRITE_BACK) for node in nodes]

    def valid_until(self, lease: Lease) -> float:
        """When the lease stops being safely held, on the lock's clock: its TTL counted from
        before the first request, less the drift allowance (earlier than ``expires_at``)."""
        return lease.acquired_at + validity_ms(lease.ttl_ms, 0.0) / 1000

    async def acquire(self, resource: str, ttl_ms: int, *, retry: RetryPolicy = DEFAULT) -> Lease:
        """Retries whole rounds over all nodes under ``retry``, then ``LockNotAcquired``."""
        return await acquire_with_retry(
            self.try_acquire, resource, ttl_ms, retry, rng=self._rng, sleep=self._sleep
        )

    async def try_acquire(self, resource: str, ttl_ms: int) -> Lease | None:
        """``GRANT`` on all nodes at once; stands with a majority and time left, else is undone."""
        if ttl_ms <= 0:
            raise ValueError("a lease needs a positive TTL")
        lock_keys = [keys.lock(resource), keys.lock_fencing(resource)]
        token = secrets.token_hex(16)
        started = self._clock()
        counters = await self._ask(
            grant(keys=lock_keys, args=[token, ttl_ms]) for grant in self._grant
        )
        granting = [i for i, counter in enumerate(counters) if counter]
        votes = len(granting)
        fencing = 0
        if votes >= quorum(self._n):
            fencing, write_back = fencing_of([int(counters[i]) for i in granting])
            if write_back:
                confirmed = await self._ask(
                    self._write_back[i](keys=lock_keys, args=[token, fencing]) for i in granting
                )
                votes = sum(1 for reply in confirmed if reply)
        elapsed_ms = (self._clock() - started) * 1000
        if granted(votes, self._n, validity_ms(ttl_ms, elapsed_ms)):
            return Lease(resource, token, fencing, started, ttl_ms)
        # A node that answered 0 set nothing; any other may hold our token.
        maybe_held = [i for i, counter in enumerate(counters) if counter != 0]
        await self._release_on(maybe_held, resource, token)
        return None

    async def release(self, lease: Lease) -> bool:
        """``RELEASE`` on every node; True only if a majority confirmed. Never raises."""
        released = await self._release_on(range(self._n), lease.resource, lease.token)
        return released >= quorum(self._n)

    async def is_locked(self, resource: str) -> bool:
        """``info`` is not None: a majority's view, ``QuorumUnreachable`` when too few answer."""
        return await self.info(resource) is not None

    async def extend(self, lease: Lease, ttl_ms: int) -> bool:
        """``EXTEND`` on every node; True if a majority did and the new TTL's validity is left."""
        if ttl_ms <= 0:
            raise ValueError("a lease needs a positive TTL")
        started = self._clock()
        replies = await self._ask(
            extend(keys=[keys.lock(lease.resource)], args=[lease.token, ttl_ms])
            for extend in self._extend
        )
        votes = sum(1 for reply in replies if reply)
        return granted(votes, self._n, validity_ms(ttl_ms, (self._clock() - started) * 1000))

    async def info(self, resource: str) -> LockInfo | None:
        """``INFO`` on every node; the token a majority holds, or None. Raises without a quorum."""
        lock_keys = [keys.lock(resource), keys.lock_fencing(resource)]
        replies = await self._ask(info(keys=lock_keys) for info in self._info)
        # A free node answers nil, a failed one FAILED: only the answers count.
        answered = [reply for reply in replies if reply is not FAILED]
        if len(answered) < quorum(self._n):
            raise QuorumUnreachable(resource, len(answered), self._n)
        views = [_node_view(reply) for reply in answered]
        return majority_holder(resource, views, self._n)

    async def _release_on(self, nodes: Iterable[int], resource: str, token: str) -> int:
        replies = await self._ask(
            self._release[i](keys=[keys.lock(resource)], args=[token]) for i in nodes
        )
        return sum(1 for reply in replies if reply)

    async def _ask(self, calls: Iterable[Awaitable[Any]]) -> list[Any]:
        """Every call at once, each bounded by the node timeout; a node that erred or timed
        out answers ``FAILED``, which is falsy like a refusal but is not Redis's nil."""
        return list(await asyncio.gather(*(self._bounded(call) for call in calls)))

    async def _bounded(self, call: Awaitable[Any]) -> Any:
        try:
            async with asyncio.timeout(self._timeout_s):
                return await call
        except (RedisError, OSError):  # TimeoutError is an OSError
            return FAILED


class _Failed:
    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "FAILED"


FAILED = _Failed()


def _node_view(reply: Any) -> NodeView | None:
    if reply is None:
        return None
    token, remaining_ms, fencing = reply
    if isinstance(token, bytes):
        token = token.decode()
    return str(token), int(remaining_ms), int(fencing)
