"""Where an origin's catalog comes from: the vector store it opens (the catalog's owner, or
a shared store), or, on a catalog replica (``PERSO_CATALOG_ORIGIN_URL``), the catalog
origin (``origin.catalog.replica``); and the catalog loaded from it at start."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from config.settings import Settings
from config.tls import client_verify
from origin.catalog.item_index import ItemIndex
from origin.catalog.replica import CatalogOrigin, index_of, load_at_start
from origin.catalog.replication import CatalogMark, CatalogRole, role_of
from origin.catalog.vector_store import VectorStore
from origin.catalog_follower import CatalogFetch, ReplicaFetch, StoreFetch
from redis_client.client import RedisClient


@dataclass
class CatalogSource:
    """Where this origin's catalog comes from: the store it opened, or the catalog origin."""

    role: CatalogRole
    store: VectorStore | None
    catalog_origin: CatalogOrigin | None
    fetch: CatalogFetch

    async def close(self) -> None:
        if self.store is not None:
            await self.store.close()
        if self.catalog_origin is not None:
            await self.catalog_origin.aclose()


def catalog_source(
    settings: Settings, redis: RedisClient, transport: httpx.AsyncBaseTransport | None
) -> CatalogSource:
    """The vector store (opened here: in local mode this process then owns the path), or
    a replica's catalog origin (``transport`` replaces the network to it in tests)."""
    role = role_of(settings)
    if role is CatalogRole.REPLICA:
        assert settings.catalog_origin_url is not None
        token = settings.origin_token.get_secret_value() if settings.origin_token else None
        source = CatalogOrigin(
            settings.catalog_origin_url,
            dim=settings.embedding_dim,
            token=token,
            transport=transport,
            verify=client_verify(settings),
        )
        return CatalogSource(role, None, source, ReplicaFetch(source))
    store = VectorStore.open(settings)
    return CatalogSource(role, store, None, StoreFetch(store, redis, settings.embedding_dim))


async def load_catalog(settings: Settings, source: CatalogSource) -> tuple[ItemIndex, CatalogMark]:
    """The catalog in memory and its mark: from the store, or (a replica) from the catalog
    origin, waited for up to ``PERSO_CATALOG_ORIGIN_WAIT_S``."""
    if source.catalog_origin is not None:
        snapshot = await load_at_start(source.catalog_origin, settings.catalog_origin_wait_s)
        return await index_of(snapshot), snapshot.mark
    return await source.fetch.everything()
