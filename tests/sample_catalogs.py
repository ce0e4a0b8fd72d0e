"""The sample catalog, ingested once per run and copied into each test that needs it.

Ingesting the 500-item sample catalog (``origin.catalog.ingest.ensure_sample_catalog``)
costs a test about 1.2 s: the text encoder over 500 descriptions, then Qdrant's local mode
committing each point. What it leaves is two things: the Redis keys (the items' vectors and
the catalog's fingerprint) and the Qdrant directory under the settings' data dir. The first
test of a run that asks for a catalog ingests it for real and keeps both (every key's
``DUMP``, a copy of the directory); the next ones get them back (``RESTORE``, a copy), which
is the state an ingest would have left, in a few milliseconds. A catalog of other settings
(size, seed, dimension, text encoder, fusion) is its own template; tests that are about
ingesting call ``ensure_sample_catalog`` themselves.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from config.settings import Settings
from origin.catalog.ingest import ensure_sample_catalog
from redis_client.client import RedisClient

# Settings that do not change what an ingest writes (where it writes it, and how a process
# serves): a template is shared by settings that differ in these alone.
_WHERE = {"data_dir", "qdrant_path", "redis_url", "event_partitions"}


@dataclass(frozen=True, slots=True)
class _Template:
    qdrant: Path  # a copy of the ingested Qdrant directory
    keys: tuple[tuple[bytes, bytes], ...]  # every Redis key and its DUMP (none expire)


@dataclass
class SampleCatalogs:
    """Templates of ingested sample catalogs, under ``root``, by what was ingested."""

    root: Path
    _templates: dict[str, _Template] = field(default_factory=dict)

    async def install(self, settings: Settings, redis: RedisClient) -> None:
        """Make ``settings``' data dir and ``redis`` (flushed: the test's own) hold the
        sample catalog, as ``ensure_sample_catalog`` would."""
        if settings.qdrant_url is not None:
            raise ValueError("templates are of Qdrant's local mode; ingest for a server")
        name = f"{settings.redis_url} {settings.model_dump_json(exclude=_WHERE)}"
        template = self._templates.get(name)
        if template is None:
            self._templates[name] = await self._ingest(settings, redis)
            return
        shutil.copytree(template.qdrant, settings.resolved_qdrant_path, dirs_exist_ok=True)
        pipe = redis.pipeline(transaction=False)
        for key, dumped in template.keys:
            pipe.restore(key, 0, dumped, replace=True)
        await pipe.execute()

    async def _ingest(self, settings: Settings, redis: RedisClient) -> _Template:
        if await redis.dbsize() != 0:
            raise RuntimeError("a template is taken from a flushed Redis: the test's own")
        assert await ensure_sample_catalog(settings, redis) == "ingested"
        keys = [key async for key in redis.scan_iter(count=1000)]
        pipe = redis.pipeline(transaction=False)
        for key in keys:
            pipe.pttl(key)
            pipe.dump(key)
        replies = await pipe.execute()
        ttls, dumps = replies[0::2], replies[1::2]
        if any(ttl != -1 for ttl in ttls):
            raise RuntimeError("an ingest wrote a key that expires: a template cannot hold it")
        qdrant = self.root / str(len(self._templates))
        shutil.copytree(settings.resolved_qdrant_path, qdrant)
        return _Template(qdrant, tuple(zip(keys, dumps, strict=True)))
