"""The running origin: what one process holds (settings, clients, the catalog index, the
feedback log, the bandit's store and configuration, its RNG and clock)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from redis.asyncio import Redis

from origin.api_keys import ApiKey
from origin.bandit import BanditConfig
from origin.exceptions import CatalogError
from origin.feedback import FeedbackLog
from origin.item_index import ItemIndex
from origin.posterior_store import PosteriorStore
from origin.vector_store import VectorStore
from perso.settings import Settings
from sync.publisher import SyncPublisher


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
    api_keys: tuple[ApiKey, ...] = ()
    inflight: int = 0

    async def replace_index(self, index: ItemIndex) -> None:
        """Swap in a new catalog index; requests already running keep the old one."""
        self.index = index

    def now_ms(self) -> int:
        return int(self.clock() * 1000)


async def load_index(store: VectorStore, dim: int) -> ItemIndex:
    batches = [batch async for batch in store.scroll_items()]
    index = await asyncio.to_thread(ItemIndex.from_batches, batches)
    if index.dim != dim:
        raise CatalogError(
            f"catalog vectors have dimension {index.dim}, PERSO_EMBEDDING_DIM is {dim}"
        )
    return index
