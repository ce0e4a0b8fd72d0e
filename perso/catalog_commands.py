"""``perso catalog``: ``ingest`` (the sample catalog into Qdrant and Redis), ``load`` (a
JSON-lines catalog to a running origin's admin API) and ``export-sample`` (the sample
catalog as JSON lines, for ``load``)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from config.settings import ConfigError, Settings
from perso.stack_endpoints import read_stack_file


def run_catalog(settings: Settings, args: argparse.Namespace) -> int:
    match args.catalog_command:
        case "load":
            return asyncio.run(_run_load(settings, args))
        case "export-sample":
            return _run_export(settings, args.file)
        case _:
            return asyncio.run(_run_ingest(settings, args.recreate))


async def _run_ingest(settings: Settings, recreate: bool) -> int:
    from origin.catalog.ingest import ensure_sample_catalog
    from perso.console import progress_line
    from perso.redis_server import RedisServer
    from redis_client.client import open_client

    server = None
    redis_url = settings.redis_url
    if not redis_url:
        server = RedisServer(settings.data_dir / "redis", binary=settings.redis_server_bin)
        redis_url = server.start().url
    redis = await open_client(redis_url)
    try:
        done = await ensure_sample_catalog(
            settings,
            redis,
            recreate=recreate,
            progress=progress_line(f"ingesting {settings.catalog_size} items"),
        )
        print(f"catalog of {settings.catalog_size} items: {done}")
    finally:
        await redis.aclose()
        if server is not None:
            server.stop()
    return 0


async def _run_load(settings: Settings, args: argparse.Namespace) -> int:
    from perso.catalog_load import load

    if not 1 <= args.batch <= 1000:
        raise ConfigError(f"--batch must be between 1 and 1000, got {args.batch}")
    stack_file = args.stack or settings.data_dir / "stack.json"
    stack = read_stack_file(settings, args.stack)
    token = settings.admin_token.get_secret_value() if settings.admin_token else None
    token = token or str(stack.get("admin_token") or "") or None
    if token is None:
        raise ConfigError(
            f"no admin token: set PERSO_ADMIN_TOKEN, or start `perso up` ({stack_file})"
        )
    origin_url = args.origin or str(stack.get("origin_url") or settings.origin_url)
    print(f"loading {args.file} into {origin_url}", flush=True)
    totals = await load(
        args.file,
        origin_url=origin_url,
        token=token,
        batch=args.batch,
        say=lambda line: print(line, flush=True),
    )
    print(f"done: {totals.summary()}")
    return 1 if totals.counts["rejected"] else 0


def _run_export(settings: Settings, path: Path) -> int:
    from origin.catalog.item_vectors import ItemVectors
    from origin.catalog.sample import generate

    vectors = ItemVectors.from_settings(settings)
    size, seed = settings.catalog_size, settings.catalog_seed
    catalog = generate(size, seed, settings.embedding_dim, vectors)
    with path.open("w", encoding="utf-8") as out:
        for row, item in enumerate(catalog.items):
            # The image vector cannot be recomputed by the origin; the text one can.
            line = {
                "item_id": item.item_id,
                "version": item.version,
                "title": item.title,
                "category": item.category,
                "category_name": item.category_name,
                "brand": item.brand,
                "price": item.price,
                "availability": item.availability.value,
                "popularity": item.popularity,
                "freshness": item.freshness,
                "created_at": item.created_at,
                "image_url": item.image_url,
                "content_type": item.content_type,
                "content_length": item.content_length,
                "image": [round(float(x), 6) for x in catalog.image[row]],
            }
            out.write(json.dumps(line, separators=(",", ":")) + "\n")
    print(f"wrote {size} items to {path}")
    return 0
