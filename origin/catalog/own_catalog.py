"""A catalog of your own from the start (``PERSO_CATALOG=empty`` or a file), before the
origin opens the stores: what ``perso up`` runs instead of the sample build.

1. A file is checked whole first (``origin.catalog.catalog_file``); any problem is a
   ``CatalogFileError`` naming the lines and fields, and nothing has been written (sample
   items of an earlier run stay).
2. Sample items an earlier run left on the same data dir are deleted (``drop_sample_items``);
   items of your own stay.
3. The file's items are written in batches of ``LOAD_BATCH``, add/update only, as the admin
   API writes them (by id and version): an item absent from the file is not deleted, and a
   load interrupted halfway is finished by the next run (what it wrote is ``unchanged``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from config.settings import Settings
from origin.catalog.catalog_file import FileCheck, check_lines, item_batches
from origin.catalog.ingest import IngestReport, ingest_items
from origin.catalog.item_vectors import ItemVectors
from origin.catalog.removal import drop_sample_items
from origin.catalog.vector_store import VectorStore
from origin.exceptions import CatalogFileError
from protocol import keys
from redis_client.client import RedisClient

LOAD_BATCH = 1000

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class OwnCatalogStart:
    dropped: int  # sample items deleted
    loaded: IngestReport  # what the file's items did (all zero without a file)
    items: int  # items in the catalog now


def check_file(path: Path, dims: dict[str, int]) -> FileCheck:
    """``check_lines`` over ``path``; a missing or empty file is a ``CatalogFileError``."""
    try:
        with path.open(encoding="utf-8") as source:
            check = check_lines(source, dims)
    except OSError as exc:
        raise CatalogFileError(f"PERSO_CATALOG: cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise CatalogFileError(f"PERSO_CATALOG: {path} is not UTF-8 text: {exc}") from exc
    if not check.ok:
        raise CatalogFileError(
            f"{path}: {check.problem_count} problem{'s' if check.problem_count > 1 else ''}, "
            f"nothing loaded:\n{check.report()}"
        )
    if check.items == 0:
        raise CatalogFileError(
            f"{path} holds no items (PERSO_CATALOG=empty starts a catalog without any)"
        )
    return check


async def start_own_catalog(
    settings: Settings, redis: RedisClient, *, progress: Progress | None = None
) -> OwnCatalogStart:
    """Make the stores hold your catalog: ``settings.catalog_file``'s items, or none.
    Opens and closes Qdrant itself (in local mode the origin opens the path after)."""
    vectors = await asyncio.to_thread(ItemVectors.from_settings, settings)
    path = settings.catalog_file
    dims = dict(vectors.modality_dims)
    check = await asyncio.to_thread(check_file, path, dims) if path is not None else None
    store = VectorStore.open(settings)
    try:
        await store.ensure_items_collection(vectors.modality_dims)
        dropped = await drop_sample_items(store, redis)
        loaded = IngestReport()
        if path is not None and check is not None:
            loaded = await _load(
                path, check.items, vectors, store, redis, dims=dims, progress=progress
            )
        return OwnCatalogStart(dropped, loaded, await store.count_items())
    finally:
        await store.close()


async def _load(
    path: Path,
    total: int,
    vectors: ItemVectors,
    store: VectorStore,
    redis: RedisClient,
    *,
    dims: dict[str, int],
    progress: Progress | None,
) -> IngestReport:
    counts = IngestReport()
    done = 0
    with path.open(encoding="utf-8") as source:
        batches = item_batches(source, dims, LOAD_BATCH)
        while batch := await asyncio.to_thread(next, batches, None):
            written = await ingest_items(batch, vectors=vectors, store=store, redis=redis)
            if written.items:
                # A rebuild that copied the catalog before this must not promote its copy.
                await redis.incr(keys.CATALOG_VERSION)
            report = written.report
            counts = IngestReport(
                inserted=counts.inserted + report.inserted,
                updated=counts.updated + report.updated,
                unchanged=counts.unchanged + report.unchanged,
                skipped=counts.skipped + report.skipped,
            )
            done += len(batch)
            if progress is not None:
                progress(done, total)
    return counts
