"""``RedisClient`` and ``connect``: a process's Redis, a node or a cluster, from its URL.

Both are redis-py's asyncio clients and take the same commands; what differs is where a
command goes. On a cluster every Lua script, transaction and blocking read must name keys
of one hash slot (the key schema's hash tags make them so, ``protocol.keys``); pipelines
that are not transactions may mix slots (the cluster client splits them by node). A
command that acts on a connection rather than a key (``WAIT``) must be sent to the node
that holds the key it is about: ``node_of``.

The cluster client follows ``MOVED`` and ``ASK`` redirections, and after a connection
error refreshes its view of the slots and tries again (``retry``: a few attempts over a
couple of seconds, enough for a replica to be promoted after a primary's failure with
the project's 1 s node timeout, bounded by the caller's own deadlines).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, TypeAlias

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.asyncio.connection import SSLConnection
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from redis_client.address import ClusterAddress, NodeAddress, parse
from redis_client.connections import NODE_CONNECTIONS, ClusterConnection, TLSClusterConnection

log = logging.getLogger(__name__)

RedisClient: TypeAlias = Redis | RedisCluster
RedisPipeline: TypeAlias = Pipeline | ClusterPipeline

# The cluster client's attempts after a connection error or a redirection storm, each after
# a jittered pause doubling from 50 ms up to 500 ms: about 2 s in all, which covers a
# failover (node timeout 1 s, then the replica's election).
CLUSTER_RETRIES = 6
CLUSTER_BACKOFF_BASE_S = 0.05
CLUSTER_BACKOFF_CAP_S = 0.5


def connect(
    url: str,
    *,
    socket_timeout: float | None = None,
    socket_connect_timeout: float | None = None,
    retry: Retry | None = None,
    max_connections: int | None = None,
) -> RedisClient:
    """A client of the node or cluster ``url`` names (``AddressError`` when it names
    neither). Replies are bytes. No connection is made until the first command."""
    address = parse(url)
    if isinstance(address, NodeAddress):
        # Only what the caller chose: redis-py's own defaults for the rest.
        chosen = {
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": socket_connect_timeout,
            "retry": retry,
            "max_connections": max_connections,
        }
        options: dict[str, Any] = {k: v for k, v in chosen.items() if v is not None}
        client = Redis.from_url(address.url, **options)
        pool = client.connection_pool  # its class is the URL scheme's: made ours
        pool.connection_class = NODE_CONNECTIONS[pool.connection_class]
        return client
    return _cluster(address, socket_timeout, socket_connect_timeout, retry, max_connections)


class _Cluster(RedisCluster):
    """redis-py's cluster client with ``ClusterConnection``s (it takes no connection class:
    its nodes take theirs from the options it shares with its nodes manager)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        tls = self.connection_kwargs.get("connection_class") is SSLConnection
        ours = TLSClusterConnection if tls else ClusterConnection
        self.connection_kwargs["connection_class"] = ours  # nodes found later
        for node in self.startup_nodes:
            node.connection_class = ours


async def ready(client: RedisClient) -> bool:
    """Learn a cluster's layout before the client is used concurrently (a node's client
    needs nothing): every process calls it once it opened Redis. redis-py's cluster client
    learns the layout lazily, on its first command, and commands that race that first one
    are sent to whatever node it knows by then: ``MOVED`` by the dozen, which make it reset
    its connections under the other callers. False (and a warning) when no node answers
    now: the client learns the layout on first use then, and the process's own retries
    cover the wait."""
    if not isinstance(client, RedisCluster):
        return True
    try:
        await client.initialize()
    except (RedisError, OSError) as exc:
        log.warning("the Redis Cluster's layout is not known yet: %r", exc)
        return False
    return True


async def open_client(
    url: str,
    *,
    socket_timeout: float | None = None,
    socket_connect_timeout: float | None = None,
    retry: Retry | None = None,
    max_connections: int | None = None,
) -> RedisClient:
    """``connect``, then ``ready``: how a process opens its Redis."""
    client = connect(
        url,
        socket_timeout=socket_timeout,
        socket_connect_timeout=socket_connect_timeout,
        retry=retry,
        max_connections=max_connections,
    )
    await ready(client)
    return client


def _cluster(
    address: ClusterAddress,
    socket_timeout: float | None,
    socket_connect_timeout: float | None,
    retry: Retry | None,
    max_connections: int | None,
) -> RedisCluster:
    backoff = ExponentialWithJitterBackoff(base=CLUSTER_BACKOFF_BASE_S, cap=CLUSTER_BACKOFF_CAP_S)
    return _Cluster(
        startup_nodes=[ClusterNode(host, port) for host, port in address.nodes],
        username=address.username,
        password=address.password,
        ssl=address.tls,
        socket_timeout=socket_timeout,
        socket_connect_timeout=socket_connect_timeout,
        retry=retry if retry is not None else Retry(backoff, CLUSTER_RETRIES),
        max_connections=max_connections if max_connections is not None else 100,
    )


def node_of(client: RedisClient, key: str) -> ClusterNode | None:
    """The cluster node that holds ``key`` now (None on a single node): where a command
    about the connection that wrote ``key`` must go."""
    if isinstance(client, RedisCluster):
        return client.get_node_from_key(key)
    return None


def is_cluster_client(client: RedisClient) -> bool:
    return isinstance(client, RedisCluster)


def decodes_responses(client: RedisClient) -> bool:
    """Does ``client`` turn replies into text (``decode_responses``)? ``connect`` never
    does; code that reads binary values refuses such a client."""
    if isinstance(client, RedisCluster):
        return bool(client.get_connection_kwargs().get("decode_responses"))
    return bool(client.connection_pool.connection_kwargs.get("decode_responses"))


async def queue_script(
    pipe: RedisPipeline,
    script: AsyncScript,
    keys: Sequence[str],
    args: Sequence[Any],
) -> None:
    """Queue ``script`` on ``pipe``. A node's pipeline loads the script first if the
    server lacks it; a cluster's pipeline cannot (and a replica promoted after a failover
    has no scripts loaded), so there the script's text goes with the call (``EVAL``: a few
    hundred bytes more, and no ``NOSCRIPT`` failure to recover from mid-pipeline)."""
    if isinstance(pipe, Pipeline):
        await script(keys=keys, args=args, client=pipe)
    else:
        text = script.script if isinstance(script.script, str) else bytes(script.script).decode()
        pipe.eval(text, len(keys), *keys, *args)
