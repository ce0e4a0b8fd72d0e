"""The catalog a stack starts from (``PERSO_CATALOG``): the sample, ingested only if
missing, or one of your own, empty or from a file; and the line that says what it is."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from config.settings import SAMPLE_CATALOG, Settings
from origin.catalog.ingest import ensure_sample_catalog
from origin.catalog.own_catalog import start_own_catalog
from perso.console import progress_line
from redis_client.client import connect


async def ensure_catalog(s: Settings, redis_url: str, say: Callable[[str], None]) -> None:
    redis = connect(redis_url)
    started = time.monotonic()
    try:
        if s.catalog == SAMPLE_CATALOG:
            done = await ensure_sample_catalog(
                s, redis, progress=progress_line(f"ingesting {s.catalog_size} items")
            )
        else:
            label = f"loading {s.catalog_file}" if s.catalog_file else ""
            own = await start_own_catalog(s, redis, progress=progress_line(label, sys.stdout))
    finally:
        await redis.aclose()
    where = s.qdrant_url or f"local mode, {s.resolved_qdrant_path}"
    took = f"{time.monotonic() - started:.1f}s"
    if s.catalog != SAMPLE_CATALOG:
        source = f"from {s.catalog_file}" if s.catalog_file else "of your own (empty start)"
        counts = ", ".join(f"{k} {v}" for k, v in own.loaded.to_json().items())
        say(
            f"catalog    {own.items} items {source}, dim {s.embedding_dim}, in {took} "
            f"(Qdrant {where}); {own.dropped} sample items dropped"
            + (f"; file: {counts}" if s.catalog_file else "")
        )
        return
    verb = {
        "current": "present",
        "redis": "copied to Redis",
        "ingested": "ingested",
        "foreign": "not generated (the collection holds items of your own)",
    }[done]
    say(
        f"catalog    {s.catalog_size} items, dim {s.embedding_dim}, {verb} "
        f"in {took} (Qdrant {where})"
    )
