"""The origin's lock, from ``PERSO_LOCK_BACKEND``, measured for ``/metrics``.

Every coordination of the origin goes through it: model deployments, catalog promotions and
ingests, per-user preference changes. The backends keep one contract
(``tests/integration/lock_contract.py``); what differs is what they survive:

- ``redis`` (default): the origin's own Redis. One node: if it fails over to a replica that
  missed the grant, two holders may overlap; fencing tokens keep the stores safe.
- ``redlock``: a majority of ``PERSO_LOCK_REDLOCK_URLS`` (independent nodes, not replicas).
  Survives the loss of a minority of nodes.
- ``postgres``: advisory locks in the database of ``PG_DSN``. For deployments that already
  run PostgreSQL and would rather not depend on Redis for coordination.

The stream workers' trimmer election stays on the streams' Redis whatever this says: the
lock lives with the data it protects.
"""

from __future__ import annotations

import random
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from config.settings import Settings
from coordination.instrumented import InstrumentedLock
from coordination.lock import Lock
from coordination.postgres_lock import PostgresLock
from coordination.redis_lock import RedisLock
from coordination.redlock import Redlock
from redis_client.client import RedisClient, connect

# A Redlock node that does not answer within this is a failed vote (much less than a TTL).
REDLOCK_NODE_TIMEOUT_S = 0.05


@asynccontextmanager
async def origin_lock(
    settings: Settings, redis: RedisClient, clock: Callable[[], float]
) -> AsyncIterator[InstrumentedLock]:
    """The configured backend for the life of the ``async with``, connections closed after."""
    rng = random.Random().random
    backend = settings.lock_backend
    if backend == "redis":
        yield InstrumentedLock(RedisLock(redis, clock), rng=rng)
        return
    if backend == "redlock":
        # No client retries: a dead node must fail its vote within the node timeout.
        nodes = [
            connect(url, retry=Retry(NoBackoff(), 0), socket_connect_timeout=1.0)
            for url in settings.lock_redlock_urls
        ]
        try:
            # Redlock measures how long a grant round took: a monotonic clock.
            inner: Lock = Redlock(
                nodes, time.monotonic, rng=rng, node_timeout_s=REDLOCK_NODE_TIMEOUT_S
            )
            yield InstrumentedLock(inner, rng=rng)
        finally:
            for node in nodes:
                await node.aclose()
        return
    assert settings.pg_dsn is not None  # the settings' own check
    postgres = await PostgresLock.open(settings.pg_dsn.get_secret_value(), clock)
    try:
        yield InstrumentedLock(postgres, rng=rng)
    finally:
        await postgres.close()
