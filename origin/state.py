"""The running origin: what one process holds (settings, clients, the catalog index, the
feedback log, the bandit's store and configuration, its RNG and clock)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
from redis.asyncio import Redis

from coordination.instrumented import InstrumentedLock
from invalidation.rules import Event, messages_for
from origin.api_keys import ApiKey
from origin.bandit import BanditConfig
from origin.exceptions import CatalogError
from origin.feedback import FeedbackLog
from origin.item_index import ItemIndex
from origin.llm.tier import LlmTier
from origin.model_deployment import ModelDeployments
from origin.posterior_store import PosteriorStore
from origin.vector_store import VectorStore
from perso.settings import Settings
from sync.exceptions import PublishFailed
from sync.publisher import SyncPublisher

log = logging.getLogger(__name__)


@dataclass
class Origin:
    settings: Settings
    redis: Redis
    store: VectorStore
    index: ItemIndex
    feedback: FeedbackLog
    posteriors: PosteriorStore
    bandit: BanditConfig
    rng: np.random.Generator
    clock: Callable[[], float]
    publisher: SyncPublisher
    lock: InstrumentedLock  # every coordination of the origin: deployments, rebuilds, users
    deployments: ModelDeployments
    llm: LlmTier  # explanations: the model when configured and wanted, else templates
    api_keys: tuple[ApiKey, ...] = ()
    inflight: int = 0

    async def replace_index(self, index: ItemIndex) -> None:
        """Swap in a new catalog index; requests already running keep the old one."""
        self.index = index

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    async def announce(self, events: Iterable[Event]) -> None:
        """Layer 2: publish to every region what ``events`` invalidate
        (``invalidation.rules``), each message once. Called after the write the events
        describe is durable: a failed publish is logged and left to the TTLs, never turned
        into a failed request."""
        messages = list(dict.fromkeys(m for event in events for m in messages_for(event)))
        if not messages:
            return
        try:
            await self.publisher.publish(messages)
        except PublishFailed as exc:
            log.warning("%d invalidations not published: %s", len(messages), exc)


async def load_index(store: VectorStore, dim: int) -> ItemIndex:
    batches = [batch async for batch in store.scroll_items()]
    index = await asyncio.to_thread(ItemIndex.from_batches, batches)
    if index.dim != dim:
        raise CatalogError(
            f"catalog vectors have dimension {index.dim}, PERSO_EMBEDDING_DIM is {dim}"
        )
    return index
