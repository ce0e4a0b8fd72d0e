"""The stream worker's composition root: ``run_worker`` builds one worker process from its
settings and runs it until told to stop, as ``edge.app`` and ``origin.app`` each build
theirs. ``perso worker`` only parses its arguments and calls it.

A worker reads the ``events:{p}`` and ``decisions:{p}`` streams in the ``embedder``
group, joins rewards to decisions and teaches the users' models and the items' posteriors
(``origin.worker.consumer``), publishes each batch's updated users and changed items
posteriors to every region's edges (``origin.worker.edge_updates``,
``origin.worker.item_updates``) and, with a Qdrant server (``QDRANT_URL``), mirrors their
models' means into its ``users`` collection (``origin.worker.qdrant_sink``; local mode
admits one process per path: the origin's).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time

from config.settings import ConfigError, Settings
from origin.catalog.vector_store import VectorStore
from origin.learned import stated_preferences
from origin.learned.posteriors import PosteriorStore
from origin.worker.consumer import StreamWorker
from origin.worker.edge_updates import EdgeUpdates, in_turn
from origin.worker.item_updates import ItemUpdates
from origin.worker.learning import learning
from origin.worker.qdrant_sink import UserVectorSink
from origin.worker.retention import configured_retention
from redis_client.client import open_client
from redis_client.durable import Durability
from sync.publisher import SyncPublisher

log = logging.getLogger(__name__)


async def run_worker(settings: Settings, consumer: str, stop: asyncio.Event) -> None:
    """Consume as ``consumer`` until ``stop`` is set; the batch in hand is finished and
    acknowledged first."""
    if not settings.redis_url:
        raise ConfigError("REDIS_URL is required by the worker (`perso up` starts one for you)")
    redis = await open_client(settings.redis_url, socket_timeout=10.0, socket_connect_timeout=2.0)
    store: VectorStore | None = None
    sink: UserVectorSink | None = None
    if settings.qdrant_url:
        store = VectorStore.open(settings)
        await store.ensure_users_collection()
        sink = UserVectorSink(store, clock=time.time)
    else:
        log.info("Qdrant local mode: user vectors stay in Redis only (set QDRANT_URL)")
    # Every batch's updated users and changed items, to every region's edges
    # (sync.messages.UserUpdate, ItemPosteriors).
    publisher = SyncPublisher(redis, settings.regions, time.time)
    edge_updates = EdgeUpdates(
        publisher, preferences=functools.partial(stated_preferences.read_many, redis)
    )
    taught = learning(settings)
    item_updates = ItemUpdates(publisher, PosteriorStore(redis, taught.posteriors))
    worker = StreamWorker(
        redis,
        partitions=settings.event_partitions,
        dim=settings.embedding_dim,
        consumer=consumer,
        clock=time.time,
        batch_size=settings.worker_batch_size,
        max_wait_ms=settings.worker_max_wait_ms,
        claim_idle_ms=settings.worker_claim_idle_ms,
        freshness=taught.freshness,
        on_batch=in_turn(sink.publish, edge_updates.publish)
        if sink is not None
        else edge_updates.publish,
        on_items=item_updates.publish,
        posteriors=taught.posteriors,
        model=taught.model,
        joins=taught.joins,
        retention=configured_retention(settings),
        durability=Durability(settings.redis_wait_replicas, settings.redis_wait_timeout_ms),
        population_every_s=settings.population_every_s,
        population_rank=settings.population_rank,
    )
    log.info("worker %s consuming %d partitions", consumer, settings.event_partitions)
    try:
        await worker.run(stop)
    finally:
        await redis.aclose()
        if store is not None:
            await store.close()
        outcomes = {outcome.value: n for outcome, n in worker.outcomes.items()}
        log.info("worker %s stopped: %s", consumer, outcomes)
