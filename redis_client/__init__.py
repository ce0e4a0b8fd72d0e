"""Connections to Redis, one node or a Redis Cluster, behind one type.

- ``address``: what a ``REDIS_URL`` names: one node (``redis://``, ``rediss://``,
  ``unix://``) or a cluster (``redis-cluster://host:port,host:port,...``), parsed and
  checked, with a clear error naming what is wrong.
- ``client``: ``RedisClient`` (redis-py's asyncio ``Redis`` or ``RedisCluster``) and
  ``connect``, the one place a process opens its Redis; ``node_of``, the node holding a
  key (for commands that act on a connection, not a key).
- ``durable``: acknowledging a write only once it reached replicas (``WAIT``).

Every process opens Redis here and nowhere else, so that one address switches all of them
(origin, workers, the sync publisher and subscribers, locks, the edge's PoP store) between
a node and a cluster. It imports no package of ours: every layer may use it.
"""
