"""Acknowledging a write only once replicas have it (``WAIT``).

Redis replicates asynchronously: a primary that fails after answering a write, before its
replica copied it, takes the write with it when the replica is promoted. ``WAIT n t``
blocks the connection that wrote until ``n`` replicas have every write it made, or ``t``
milliseconds passed, and says how many did. So a write that must survive a failover (an
accepted feedback event) is followed by ``WAIT`` on the same connection (the same
pipeline, on the node holding the written key), and is acknowledged only when enough
replicas confirmed it; otherwise the caller says "not durable yet, retry" and the retry,
deduplicated, repeats nothing.

A process that writes through many connections (a stream worker: scripts, pipelines,
readers) cannot ``WAIT`` on each. ``barrier`` covers them all: a primary replicates one
ordered stream, so a small write made after the others, and ``WAIT`` on *its* connection,
confirms every write the primary took before it. The worker acknowledges a batch only past
such a barrier on every primary, so a failover cannot undo what it learnt from an
acknowledged entry while the entry itself is gone from the group's pending list.

``WAIT`` is a bound, not a guarantee of Redis Cluster's: a replica that confirmed can still
lose an election to one that did not (with one replica per primary, as ``perso cluster``
starts, it cannot). Its cost is one replication round trip on the write's path: the
figure is in docs/measured.md (``benchmarks.failover``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import RedisClusterException, RedisError

from redis_client.client import RedisClient, RedisPipeline, node_of

# How long a barrier key lives: it holds nothing, and is written again by the next barrier.
BARRIER_TTL_MS = 60_000
# Tags tried to find one in a primary's slots: a primary serving even one slot of 16384 is
# found within a few hundred thousand; one serving none is not a primary to wait for.
TAG_SEARCH = 1_000_000


class NotReplicated(RedisError):
    """Fewer replicas than required confirmed a write within the bound: it is on the
    primary, and may not survive its failure. A ``RedisError``: whoever handles Redis
    failures (a 503 and a retry, a worker's back-off) handles this one alike."""

    def __init__(self, confirmed: int, required: int, timeout_ms: int) -> None:
        super().__init__(
            f"{confirmed} of {required} replicas confirmed the write within {timeout_ms} ms"
        )
        self.confirmed = confirmed
        self.required = required


@dataclass(frozen=True)
class Durability:
    """How many replicas must confirm a write before it is acknowledged (0: none, the
    primary's answer is enough), and how long to wait for them."""

    replicas: int = 0
    timeout_ms: int = 100
    # A hash tag that maps to each primary, by node name (found once, kept while the
    # cluster's layout keeps it there).
    _tags: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.replicas < 0:
            raise ValueError(f"replicas must be >= 0, got {self.replicas}")
        if self.timeout_ms < 1:
            raise ValueError(f"timeout_ms must be >= 1, got {self.timeout_ms}")

    @property
    def waits(self) -> bool:
        return self.replicas > 0

    def queue_wait(self, pipe: RedisPipeline, client: RedisClient, key: str) -> bool:
        """Queue ``WAIT`` on ``pipe`` after the writes to ``key`` queued there, on the node
        that holds it; False (nothing queued) when no replica is required. ``pipe`` is a
        pipeline of ``client``."""
        if not self.waits:
            return False
        node = node_of(client, key)
        if node is None:
            pipe.execute_command("WAIT", self.replicas, self.timeout_ms)
        else:
            pipe.execute_command("WAIT", self.replicas, self.timeout_ms, target_nodes=node)
        return True

    def check(self, confirmed: object) -> None:
        """Raise ``NotReplicated`` unless ``WAIT``'s reply ``confirmed`` is enough."""
        count = int(confirmed) if isinstance(confirmed, int | str | bytes) else 0
        if count < self.replicas:
            raise NotReplicated(count, self.replicas, self.timeout_ms)

    async def barrier(self, client: RedisClient, barrier_key: Callable[[str], str]) -> None:
        """Return once every write made to ``client``'s Redis before the call, on any
        connection, is on enough replicas of every primary (``NotReplicated`` otherwise);
        nothing when no replica is required. ``barrier_key`` makes the key written, from
        a hash tag (``protocol.keys``)."""
        if not self.waits:
            return
        async with client.pipeline(transaction=False) as pipe:
            if isinstance(client, RedisCluster):
                for node in client.get_primaries():
                    self._queue_barrier(pipe, barrier_key(self._tag_of(client, node)), node)
            else:
                self._queue_barrier(pipe, barrier_key("barrier"), None)
            replies = await pipe.execute()
        for confirmed in replies[1::2]:
            self.check(confirmed)

    def _queue_barrier(self, pipe: RedisPipeline, key: str, node: ClusterNode | None) -> None:
        pipe.set(key, b"1", px=BARRIER_TTL_MS)
        if node is None:
            pipe.execute_command("WAIT", self.replicas, self.timeout_ms)
        else:
            pipe.execute_command("WAIT", self.replicas, self.timeout_ms, target_nodes=node)

    def _tag_of(self, client: RedisCluster, node: ClusterNode) -> str:
        """A hash tag whose slot ``node`` serves now."""
        tag = self._tags.get(node.name)
        if tag is not None and _holder(client, tag) == node.name:
            return tag
        for n in range(TAG_SEARCH):
            candidate = str(n)
            holder = _holder(client, candidate)
            self._tags[holder] = candidate
            if holder == node.name:
                return candidate
        raise RedisClusterException(f"{node.name} serves no slot")


def _holder(client: RedisCluster, key: str) -> str:
    node = client.get_node_from_key(key)
    if node is None:
        raise RedisClusterException(f"no node serves the slot of {key!r}")
    return node.name
