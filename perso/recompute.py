"""``perso recompute``: the users' models recomputed from the retained log in a scratch
``redis-server`` this command starts and stops, and how far the live ones are from them
(``origin.worker.recompute``). The live Redis is only read."""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from config.settings import ConfigError, Settings
from origin.worker.recompute import recompute, recompute_config
from origin.worker.recompute_comparison import DEFAULT_TOLERANCE, as_json, text
from perso.evaluate import moment_ms
from perso.redis_server import RedisServer
from redis_client.client import RedisClient, connect


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--since",
        default="0",
        help="recompute from: a span back from now (30m, 6h, 7d) or milliseconds since the "
        "epoch (default 0: all the retained log)",
    )
    parser.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        help="distance of the models' means within which a user matches "
        f"(default {DEFAULT_TOLERANCE})",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=5.0,
        help="seconds before the cut within which an entry (a decision: plus the reward "
        "window) counts as in flight (default 5)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


async def run(settings: Settings, live: RedisClient, args: argparse.Namespace) -> int:
    if not args.tolerance > 0:
        raise ConfigError(f"--tolerance must be above 0, got {args.tolerance}")
    if not args.settle >= 0:
        raise ConfigError(f"--settle must be 0 or more, got {args.settle}")
    since_ms = moment_ms(args.since, int(time.time() * 1000))
    config = recompute_config(settings, settle_s=args.settle, tolerance=args.tolerance)
    with tempfile.TemporaryDirectory(prefix="perso-recompute-") as scratch_dir:
        server = RedisServer(Path(scratch_dir), persistent=False, binary=settings.redis_server_bin)
        await asyncio.to_thread(server.start)
        scratch = connect(server.url, socket_timeout=60.0, socket_connect_timeout=2.0)
        try:
            summary, _ = await recompute(live, scratch, config, since_ms=since_ms, clock=time.time)
        finally:
            await scratch.aclose()
            server.stop()
    print(json.dumps(as_json(summary)) if args.json else text(summary))
    return 0
