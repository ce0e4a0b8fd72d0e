"""Item vectors and metadata in Qdrant: a server at ``QDRANT_URL``, else local mode on disk.

Qdrant is the system of record for the catalog. Local mode is an exact, pure-Python index
meant for small collections (measured here: 4 ms per query at 10K items, 72 ms at 100K,
seconds with a filter), and it admits one process per path, so the origin does not query it
per request: it loads the catalog at start-up into ``ItemIndex`` and searches in memory.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from qdrant_client import AsyncQdrantClient, models

from config.settings import Settings
from origin.catalog.items import EXTERNAL_CATALOG, Item, from_payload, point_id, to_payload
from origin.exceptions import VectorStoreError

_USER_NAMESPACE = uuid.UUID("0b7e4b1c-5d2a-4f60-9c1e-2a7d3f8e6b45")
ITEMS = "items"
# The user embeddings collection: the streaming embeddings, one point per user.
USERS = "users"
# Named vectors of an item point: the fused vector that retrieval uses, and its modalities
# (origin.catalog.fusion.MODALITIES), each of its own size; a point holds the modalities it has.
UNIFIED = "unified"
TEXT = "text"
IMAGE = "image"
AUDIO = "audio"
VIDEO = "video"


class VectorStore:
    def __init__(self, client: AsyncQdrantClient, dim: int) -> None:
        self._client = client
        self.dim = dim

    @classmethod
    def open(cls, settings: Settings) -> VectorStore:
        if settings.qdrant_url:
            key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
            client = AsyncQdrantClient(url=settings.qdrant_url, api_key=key, timeout=10)
            return cls(client, settings.embedding_dim)
        path = settings.resolved_qdrant_path
        path.mkdir(parents=True, exist_ok=True)
        try:
            client = AsyncQdrantClient(path=str(path))
        except RuntimeError as exc:  # local mode holds a file lock per path
            raise VectorStoreError(
                f"cannot open Qdrant local storage at {path}: {exc} "
                "(only one process may use it; is an origin already running?)"
            ) from exc
        return cls(client, settings.embedding_dim)

    async def close(self) -> None:
        await self._client.close()

    async def ping(self) -> bool:
        try:
            await self._client.get_collections()
        except Exception:  # any failure means "not reachable" here
            return False
        return True

    async def ensure_items_collection(
        self, modality_dims: Mapping[str, int], collection: str = ITEMS
    ) -> None:
        """Create the items collection (or a rebuild's slot, ``collection``) with a named
        vector per modality (``modality_dims``: name -> size) besides the unified one, or
        check that the existing one has exactly these sizes."""
        wanted = {UNIFIED: self.dim, **modality_dims}
        if await self._client.collection_exists(collection):
            info = await self._client.get_collection(collection)
            vectors = info.config.params.vectors
            have = {n: p.size for n, p in vectors.items()} if isinstance(vectors, dict) else {}
            for name, size in wanted.items():
                if have.get(name) != size:
                    raise VectorStoreError(
                        f"collection {collection!r} holds {name!r} vectors of size "
                        f"{have.get(name)}, the configuration makes {size} (PERSO_EMBEDDING_DIM, "
                        "PERSO_TEXT_ENCODER, PERSO_FUSION_WEIGHTS); re-ingest with --recreate"
                    )
            return
        await self._client.create_collection(
            collection,
            vectors_config={
                name: models.VectorParams(size=size, distance=models.Distance.COSINE)
                for name, size in wanted.items()
            },
        )

    async def ensure_users_collection(self) -> None:
        """Create the users collection (cosine, the configured dimension) if missing."""
        if await self._client.collection_exists(USERS):
            return
        params = models.VectorParams(size=self.dim, distance=models.Distance.COSINE)
        await self._client.create_collection(USERS, vectors_config=params)

    async def upsert_users(
        self, updates: Sequence[tuple[str, int, npt.NDArray[np.float32]]], updated_ms: int
    ) -> None:
        """Upsert (user id, version, embedding) points; an older version never replaces a
        newer one within a batch (the caller sends each user's latest)."""
        points = [
            models.PointStruct(
                id=str(uuid.uuid5(_USER_NAMESPACE, user_id)),
                vector=vector.astype(float).tolist(),
                payload={
                    "user_id": user_id,
                    "version": version,
                    "updated_at": updated_ms,
                    "embedding_source": "streaming",
                },
            )
            for user_id, version, vector in updates
        ]
        await self._client.upsert(USERS, points=points, wait=True)

    async def get_user(self, user_id: str) -> tuple[int, npt.NDArray[np.float32]] | None:
        """(version, vector) of a user's point, or None."""
        if not await self._client.collection_exists(USERS):
            return None
        records = await self._client.retrieve(
            USERS, ids=[str(uuid.uuid5(_USER_NAMESPACE, user_id))], with_vectors=True
        )
        if not records or records[0].payload is None:
            return None
        vector = np.asarray(records[0].vector, dtype=np.float32)
        return int(records[0].payload["version"]), vector

    async def drop_items_collection(self) -> None:
        """Drop the catalog: the collection ``items`` names and every rebuild slot."""
        live = await self.items_slot()
        if live is not None and live != ITEMS:
            await self._client.update_collection_aliases(
                change_aliases_operations=[
                    models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=ITEMS))
                ]
            )
        for name in {*await self.item_slots(), *([live] if live else [])}:
            await self._client.delete_collection(name)

    # --- blue-green slots (origin.catalog.rebuild) ----------------------------------------
    # ``items`` is either a collection (as ingest first creates it) or an alias of a slot
    # ``items__r<n>`` that a rebuild built and promoted.

    async def items_slot(self) -> str | None:
        """The collection ``items`` resolves to: a slot, ``items`` itself, or None."""
        aliases = await self._client.get_aliases()
        for alias in aliases.aliases:
            if alias.alias_name == ITEMS:
                return alias.collection_name
        return ITEMS if await self._client.collection_exists(ITEMS) else None

    async def item_slots(self) -> list[str]:
        """Every rebuild slot, live or not."""
        collections = await self._client.get_collections()
        return sorted(c.name for c in collections.collections if slot_number(c.name) is not None)

    async def promote(self, slot: str) -> None:
        """Make ``items`` name ``slot``. From one slot to another this is one atomic alias
        change; the first promotion replaces the plain ``items`` collection, which is
        dropped first (the alias cannot share its name)."""
        if await self._client.collection_exists(ITEMS) and await self.items_slot() == ITEMS:
            await self._client.delete_collection(ITEMS)
        await self._client.update_collection_aliases(
            change_aliases_operations=[
                models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=ITEMS)),
                models.CreateAliasOperation(
                    create_alias=models.CreateAlias(collection_name=slot, alias_name=ITEMS)
                ),
            ]
        )

    async def drop_collection(self, name: str) -> None:
        await self._client.delete_collection(name)

    async def scroll_points(
        self, collection: str, batch: int = 1000
    ) -> AsyncIterator[tuple[list[Item], list[dict[str, list[float]]]]]:
        """Every item of ``collection`` with all its named vectors, in batches."""
        offset: Any = None
        while True:
            records, offset = await self._client.scroll(
                collection, limit=batch, offset=offset, with_payload=True, with_vectors=True
            )
            if records:
                items = [from_payload(r.payload or {}) for r in records]
                named = [dict(r.vector) if isinstance(r.vector, dict) else {} for r in records]
                yield items, named  # type: ignore[misc]
            if offset is None:
                return

    async def upsert_items(
        self,
        items: Sequence[Item],
        vectors: Mapping[str, npt.NDArray[np.float32]],
        present: Mapping[str, npt.NDArray[np.bool_]] | None = None,
        collection: str = ITEMS,
    ) -> None:
        """Upsert by item id: writing the same item twice leaves one point. ``present[name]``
        says which rows have that vector (default: all); a point omits the others."""
        points = []
        for row, item in enumerate(items):
            named = {
                name: matrix[row].tolist()
                for name, matrix in vectors.items()
                if present is None or name not in present or present[name][row]
            }
            point_id_ = point_id(item.item_id)
            points.append(models.PointStruct(id=point_id_, vector=named, payload=to_payload(item)))
        await self._client.upsert(collection, points=points, wait=True)

    async def versions(self, item_ids: Sequence[str]) -> dict[str, int]:
        """The stored version of each of ``item_ids`` that exists."""
        if not item_ids or not await self._client.collection_exists(ITEMS):
            return {}
        records = await self._client.retrieve(
            ITEMS,
            ids=[point_id(i) for i in item_ids],
            with_payload=models.PayloadSelectorInclude(include=["item_id", "version"]),
        )
        return {
            str(r.payload["item_id"]): int(r.payload.get("version", 1))
            for r in records
            if r.payload is not None and "item_id" in r.payload
        }

    async def any_foreign_item(self) -> Item | None:
        """An item that no sample build wrote (ingested, or of another tool), if any."""
        if not await self._client.collection_exists(ITEMS):
            return None
        records, _ = await self._client.scroll(
            ITEMS, scroll_filter=_OWN_ITEMS, limit=1, with_payload=True
        )
        if not records or records[0].payload is None:
            return None
        return from_payload(records[0].payload)

    async def delete_items(self, item_ids: Sequence[str]) -> None:
        """Delete the points of ``item_ids``; ids without a point are no error."""
        if not item_ids or not await self._client.collection_exists(ITEMS):
            return
        selector = models.PointIdsList(points=[point_id(i) for i in item_ids])
        await self._client.delete(ITEMS, points_selector=selector, wait=True)

    async def sample_item_ids(self, batch: int = 2000) -> list[str]:
        """The ids of every item a sample build wrote (its ``catalog`` is a build's
        fingerprint: neither empty nor ``external``)."""
        if not await self._client.collection_exists(ITEMS):
            return []
        sample = models.Filter(must_not=[_OWN_ITEMS])
        selector = models.PayloadSelectorInclude(include=["item_id"])
        found: list[str] = []
        offset: Any = None
        while True:
            records, offset = await self._client.scroll(
                ITEMS, scroll_filter=sample, limit=batch, offset=offset, with_payload=selector
            )
            found.extend(str(r.payload["item_id"]) for r in records if r.payload)
            if offset is None:
                return found

    async def count_items(self) -> int:
        if not await self._client.collection_exists(ITEMS):
            return 0
        result = await self._client.count(ITEMS, exact=True)
        return result.count

    async def get_item(self, item_id: str) -> Item | None:
        if not await self._client.collection_exists(ITEMS):
            return None
        records = await self._client.retrieve(ITEMS, ids=[point_id(item_id)], with_payload=True)
        if not records or records[0].payload is None:
            return None
        return from_payload(records[0].payload)

    async def any_item(self) -> Item | None:
        """One stored item, or None when the collection is empty or missing."""
        if not await self._client.collection_exists(ITEMS):
            return None
        records, _ = await self._client.scroll(ITEMS, limit=1, with_payload=True)
        if not records or records[0].payload is None:
            return None
        return from_payload(records[0].payload)

    async def items_of(self, item_ids: Sequence[str]) -> tuple[list[Item], npt.NDArray[np.float32]]:
        """The items of ``item_ids`` the store holds, with their unified vectors (another
        origin's ingest, to reload: ``origin.control``)."""
        if not item_ids or not await self._client.collection_exists(ITEMS):
            return [], np.empty((0, self.dim), dtype=np.float32)
        records = await self._client.retrieve(
            ITEMS,
            ids=[point_id(i) for i in item_ids],
            with_payload=True,
            with_vectors=[UNIFIED],
        )
        found = [r for r in records if r.payload is not None]
        items = [from_payload(r.payload or {}) for r in found]
        matrix = np.array([_unified(r.vector) for r in found], dtype=np.float32)
        return items, matrix.reshape(len(found), self.dim)

    async def scroll_items(
        self, batch: int = 2000
    ) -> AsyncIterator[tuple[list[Item], npt.NDArray[np.float32]]]:
        """Every item with its unified vector, in batches; none without a collection."""
        if not await self._client.collection_exists(ITEMS):
            return
        offset: Any = None
        while True:
            records, offset = await self._client.scroll(
                ITEMS, limit=batch, offset=offset, with_payload=True, with_vectors=[UNIFIED]
            )
            if records:
                items = [from_payload(r.payload or {}) for r in records]
                matrix = np.array([_unified(r.vector) for r in records], dtype=np.float32)
                yield items, matrix
            if offset is None:
                return


# Items no sample build wrote: ingested through the admin API, or written by another tool.
_OWN_ITEMS = models.Filter(
    should=[
        models.FieldCondition(key="catalog", match=models.MatchAny(any=["", EXTERNAL_CATALOG])),
        models.IsEmptyCondition(is_empty=models.PayloadField(key="catalog")),
    ]
)

SLOT_PREFIX = f"{ITEMS}__r"


def slot_name(number: int) -> str:
    return f"{SLOT_PREFIX}{number}"


def slot_number(name: str) -> int | None:
    """The build number of a slot's name; None for any other collection."""
    digits = name.removeprefix(SLOT_PREFIX)
    if digits == name or not digits.isdigit():
        return None
    return int(digits)


def _unified(vector: Any) -> list[float]:
    if isinstance(vector, dict) and isinstance(vector.get(UNIFIED), list):
        return list(vector[UNIFIED])
    raise VectorStoreError(f"point has no {UNIFIED!r} vector")
