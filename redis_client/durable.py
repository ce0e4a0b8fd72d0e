"""Acknowledging a write only once replicas have it (``WAIT``).

Redis replicates asynchronously: a primary that fails after answering a write, before its
replica copied it, takes the write with it when the replica is promoted. ``WAIT n t``
blocks the connection that wrote until ``n`` replicas have every write it made, or ``t``
milliseconds passed, and says how many did. So a write that must survive a failover (an
accepted feedback event) is followed by ``WAIT`` on the same connection (the same
pipeline, on the node holding the written key), and is acknowledged only when enough
replicas confirmed it; otherwise the caller says "not durable yet, retry" and the retry,
deduplicated, repeats nothing.

``WAIT`` is a bound, not a guarantee of Redis Cluster's: a replica that confirmed can still
lose an election to one that did not (with one replica per primary, as ``perso cluster``
starts, it cannot). Its cost is one replication round trip on the write's path: the
figure is in the README (``benchmarks.failover``).
"""

from __future__ import annotations

from dataclasses import dataclass

from redis_client.client import RedisClient, RedisPipeline, node_of


class NotReplicated(Exception):
    """Fewer replicas than required confirmed a write within the bound: it is on the
    primary, and may not survive its failure."""

    def __init__(self, confirmed: int, required: int, timeout_ms: int) -> None:
        super().__init__(
            f"{confirmed} of {required} replicas confirmed the write within {timeout_ms} ms"
        )
        self.confirmed = confirmed
        self.required = required


@dataclass(frozen=True, slots=True)
class Durability:
    """How many replicas must confirm a write before it is acknowledged (0: none, the
    primary's answer is enough), and how long to wait for them."""

    replicas: int = 0
    timeout_ms: int = 100

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
