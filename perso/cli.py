"""The ``perso`` command: one entry point for every process of the product.

perso up                      the whole stack on embedded defaults, until Ctrl-C; its counts:
                              --regions, --edges-per-region, --origins, --workers,
                              --redis node|cluster; --demo for the storefront's demo mode;
                              --llm local: a local model behind the LLM tier
perso demo                    the stack under simulated traffic, then a report
perso origin | edge | worker  one process of the stack (what ``up`` runs); worker --count N
perso redis                   an embedded redis-server in the foreground
perso catalog ingest          write the sample catalog to Qdrant and Redis
perso workers                 the event streams and stream workers: lag, pending, figures
perso evaluate                candidate policies estimated offline on the decision log
perso replay                  the users' models rebuilt from the retained log, against the live
perso catalog load FILE       send a JSON-lines catalog to the origin's admin API
perso catalog export-sample   write the sample catalog as JSON lines (for `load`)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from config.environment import load_settings
from config.settings import EMPTY_CATALOG, ConfigError, Settings
from config.tls import scheme
from protocol.exceptions import PersoError

log = logging.getLogger("perso")

# ``perso up --demo``: the storefront's token route, as ``perso demo`` runs; every other
# setting as shipped (the freshness tiers hold nothing while the workers keep up).
DEMO_MODE: dict[str, object] = {"demo_tokens": True}

CATALOG_HELP = (
    "sample (generated), empty (items only through the admin API), or a JSON-lines file of "
    "items; default: PERSO_CATALOG"
)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1, not {text!r}")
    return value


def _up_arguments(up: argparse.ArgumentParser) -> None:
    """``perso up``'s options: what the catalog starts from, the stack's counts, its Redis,
    demo mode and the language model."""
    up.add_argument("--catalog", help=CATALOG_HELP)
    up.add_argument(
        "--redis",
        choices=("node", "cluster"),
        default="node",
        help="without REDIS_URL: one embedded Redis (node, the default), or an embedded "
        "Redis Cluster of 3 primaries with a replica each (cluster)",
    )
    up.add_argument(
        "--edges-per-region",
        type=int,
        default=1,
        metavar="N",
        help="edge processes per region, each on its own port; with N > 1 a region's "
        "processes are one PoP sharing a store in the stack's Redis: entries, rate limits, "
        "one origin fill per key (default 1)",
    )
    up.add_argument(
        "--origins",
        type=_positive,
        default=1,
        help="origin processes on consecutive ports from PERSO_ORIGIN_PORT (1); the first "
        "owns the catalog's store, the others are its catalog replicas",
    )
    up.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="stream worker processes (default: PERSO_WORKERS, 1)",
    )
    up.add_argument(
        "--regions",
        metavar="R1,R2,...",
        help="the regions, one PoP of edges each (default: PERSO_REGIONS)",
    )
    up.add_argument(
        "--demo",
        action="store_true",
        help="demo mode for the storefront at the edges' /: their POST /v1/demo/token hands "
        "a user token to anyone who asks (PERSO_DEMO_TOKENS); never in production",
    )
    up.add_argument(
        "--llm",
        choices=("settings", "local"),
        default="settings",
        help="the model behind the origin's LLM tier: LLM_BASE_URL, else templates only "
        "(settings, the default), or a small local model the stack runs on llama.cpp "
        "(local; needs `make llm-deps`)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="perso", description="Edge-first real-time personalization."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    _up_arguments(
        sub.add_parser(
            "up", help="start Redis, the catalog, origin, workers and one edge per region"
        )
    )

    demo = sub.add_parser("demo", help="run the stack under simulated traffic and report")
    demo.add_argument("--catalog", help=CATALOG_HELP)
    demo.add_argument("--seconds", type=float, default=30.0, help="traffic duration (30)")
    demo.add_argument("--concurrency", type=int, default=8, help="virtual browsers (8)")
    demo.add_argument("--users", type=int, default=3000, help="simulated users (3000)")
    demo.add_argument("--seed", type=int, default=1, help="traffic seed (1)")
    demo.add_argument(
        "--evaluate",
        action="store_true",
        help="then estimate candidate policies on the demo's own log (perso evaluate)",
    )
    demo.add_argument(
        "--report",
        type=Path,
        metavar="DIR",
        help="where the report folder (index.html and its PNGs) goes (DATA_DIR/demo/report)",
    )

    origin = sub.add_parser("origin", help="serve the origin API")
    origin.add_argument("--port", type=int, help="default: PERSO_ORIGIN_PORT")

    edge = sub.add_parser("edge", help="serve one edge node")
    edge.add_argument("--region", help="default: PERSO_REGION")
    edge.add_argument("--port", type=int, help="default: PERSO_EDGE_PORT_BASE")

    worker = sub.add_parser("worker", help="run streaming embedding workers")
    worker.add_argument(
        "--consumer",
        help="consumer name, stable across restarts (with --count: the prefix of "
        "<prefix>-0 ... <prefix>-N-1; default: host name, or host-pid for one worker)",
    )
    worker.add_argument(
        "--count",
        type=int,
        default=1,
        help="worker processes to run and supervise (1: this process is the worker)",
    )

    sub.add_parser("redis", help="run an embedded redis-server in the foreground")
    cluster = sub.add_parser(
        "cluster", help="a Redis Cluster on loopback from the embedded redis-server"
    )
    cluster_sub = cluster.add_subparsers(dest="cluster_command", required=True, metavar="action")
    cluster_up = cluster_sub.add_parser(
        "up", help="start 3 primaries and their replicas, in the foreground until Ctrl-C"
    )
    cluster_up.add_argument("--primaries", type=int, default=3, help="primaries (3)")
    cluster_up.add_argument("--replicas", type=int, default=1, help="replicas each (1)")
    cluster_sub.add_parser("down", help="stop the cluster `perso cluster up` runs")

    status = sub.add_parser("workers", help="streams and stream workers: lag, pending, figures")
    status.add_argument(
        "--stack", type=Path, help="stack.json of `perso up` (default: <PERSO_DATA_DIR>/stack.json)"
    )

    _log_commands(sub)

    catalog = sub.add_parser("catalog", help="sample catalog, catalogs of your own")
    catalog_sub = catalog.add_subparsers(dest="catalog_command", required=True, metavar="action")
    ingest = catalog_sub.add_parser("ingest", help="generate and write the sample catalog")
    ingest.add_argument("--size", type=int, help="items (default: PERSO_CATALOG_SIZE)")
    ingest.add_argument("--seed", type=int, help="generator seed (default: PERSO_CATALOG_SEED)")
    ingest.add_argument("--recreate", action="store_true", help="drop the collection first")
    load = catalog_sub.add_parser("load", help="send a JSON-lines catalog to a running origin")
    load.add_argument("file", type=Path, help="one item (a JSON object) per line")
    load.add_argument("--origin", help="origin URL (default: stack.json, else PERSO_ORIGIN_URL)")
    load.add_argument("--batch", type=int, default=500, help="items per request (500, max 1000)")
    load.add_argument(
        "--stack", type=Path, help="stack.json of `perso up` (default: <PERSO_DATA_DIR>/stack.json)"
    )
    export = catalog_sub.add_parser("export-sample", help="write the sample catalog as JSON lines")
    export.add_argument("file", type=Path)
    export.add_argument("--size", type=int, help="items (default: PERSO_CATALOG_SIZE)")
    export.add_argument("--seed", type=int, help="generator seed (default: PERSO_CATALOG_SEED)")
    return parser


def _log_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``perso evaluate`` and ``perso replay``: commands that read the logs in Redis."""
    from perso import evaluate as evaluate_command
    from perso import replay as replay_command

    for name, command, about in (
        ("evaluate", evaluate_command, "estimate candidate policies offline on the decision log"),
        ("replay", replay_command, "rebuild the users' models from the retained log, compare"),
    ):
        parser = sub.add_parser(name, help=about)
        parser.add_argument(
            "--stack",
            type=Path,
            help="stack.json of `perso up` (default: <PERSO_DATA_DIR>/stack.json)",
        )
        command.add_arguments(parser)


def _serve(app: object, settings: Settings, port: int) -> int:
    import uvicorn

    config = uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=settings.host,
        port=port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level=settings.log_level,
        timeout_graceful_shutdown=10,
        # HTTPS with the parts' certificate (PERSO_TLS_CERT_FILE, config.tls), else HTTP
        ssl_certfile=settings.tls_cert_file,
        ssl_keyfile=settings.tls_key_file,
    )
    server = uvicorn.Server(config)
    server.run()
    return 0 if server.started else 1


def advertised(settings: Settings, port: int) -> Settings:
    """``settings`` with the URL this process registers at for the operations page:
    ``PERSO_ADVERTISE_URL``, else its own host and port."""
    if settings.advertise_url:
        return settings
    url = f"{scheme(settings)}://{settings.host}:{port}"
    return settings.model_copy(update={"advertise_url": url})


def _run_origin(settings: Settings, port: int | None) -> int:
    from origin.app import create_app

    port = port or settings.origin_port
    return _serve(create_app(advertised(settings, port)), settings, port)


def _run_edge(settings: Settings, region: str | None, port: int | None) -> int:
    from edge.app import create_app

    region = region or settings.region
    port = port or settings.edge_port_base
    return _serve(create_app(advertised(settings, port), region=region), settings, port)


async def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _run_worker(settings: Settings, consumer: str) -> int:
    from origin.worker.app import run_worker

    await run_worker(settings, consumer, await _stop_on_signals())
    return 0


async def _run_worker_pool(base: str | None, count: int) -> int:
    from perso.worker_pool import WorkerPool, consumer_names, default_consumer_base

    stop = await _stop_on_signals()
    names = consumer_names(base or default_consumer_base(), count)
    log.info("supervising %d workers: %s", count, ", ".join(names))
    pool = WorkerPool(names, env=os.environ)
    code = await pool.run(stop)
    log.info("worker pool stopped (%d restarts)", pool.restarts)
    return code


async def _run_up(settings: Settings, args: argparse.Namespace) -> int:
    from perso.stack import Stack
    from perso.try_it import try_it

    stop = await _stop_on_signals()
    # Flushed: the start-up lines (where the catalog came from) show in a log at once.
    if args.edges_per_region < 1:
        raise ConfigError(f"--edges-per-region must be at least 1, got {args.edges_per_region}")
    if args.demo:
        print(
            "demo mode: the edges' demo token route on (every other setting as shipped)",
            flush=True,
        )
    stack = Stack(
        settings,
        publish=True,
        say=lambda line: print(line, flush=True),
        redis=args.redis,
        edges_per_region=args.edges_per_region,
        origins=args.origins,
        llm=args.llm,
    )
    try:
        endpoints = await stack.start_unless(stop)
        if endpoints is None:
            print("interrupted while starting; stopped", file=sys.stderr)
            return 130
        first_edge = next(iter(endpoints.edges.values()))
        print(f"stack up; endpoints in {stack.stack_file}; Ctrl-C stops it", flush=True)
        print(
            f"operations {endpoints.origin_url}/ops (the admin token: admin_token in "
            f"{stack.stack_file.name}, or PERSO_ADMIN_TOKEN)",
            flush=True,
        )
        if settings.demo_tokens:
            print(
                f"storefront {first_edge}/ (demo mode: the edges' POST /v1/demo/token gives "
                "a user token to anyone who can reach them)",
                flush=True,
            )
        lines = try_it(endpoints.origin_url, first_edge, endpoints.api_key, settings.tls_ca_file)
        print("\n".join(lines), flush=True)
        if args.llm == "local":
            print(
                "the local model explains active users' items: POST /v1/explain "
                "(docs/running/local-model.md); its log: "
                f"{settings.data_dir / 'logs' / 'llm.log'}",
                flush=True,
            )
        # A child that exits is restarted (logged on stderr); one that keeps failing ends it.
        gave_up = await stack.supervise(stop)
    finally:
        await stack.stop()
    if gave_up is not None:
        print(f"{gave_up.name} kept failing; stack stopped", file=sys.stderr)
        return 1
    print("stack stopped")
    return 0


async def _run_demo(settings: Settings, args: argparse.Namespace) -> int:
    from perso import demo_report
    from perso.demo import format_report, run_demo

    if settings.catalog == EMPTY_CATALOG:
        raise ConfigError(
            "the demo needs items to recommend: use --catalog sample (the default) or a file"
        )

    report = await run_demo(
        settings,
        seconds=args.seconds,
        concurrency=args.concurrency,
        users=args.users,
        seed=args.seed,
        evaluate=args.evaluate,
    )
    print(format_report(report))
    index = demo_report.write(report, args.report or settings.data_dir / "demo" / "report")
    print(f"\nreport: {index}")
    print(json.dumps(report.summary()))
    return 0 if report.total().requests > 0 else 1


async def _run_redis(settings: Settings) -> int:
    from perso.redis_server import RedisServer

    stop = await _stop_on_signals()
    server = RedisServer(settings.data_dir / "redis", binary=settings.redis_server_bin)
    server.start()
    try:
        print(f"REDIS_URL={server.url}", flush=True)
        await stop.wait()
    finally:
        server.stop()
    return 0


async def _run_cluster_up(settings: Settings, args: argparse.Namespace) -> int:
    from perso.redis_cluster import RedisCluster

    stop = await _stop_on_signals()
    state = settings.data_dir / "cluster.json"
    cluster = RedisCluster(
        settings.data_dir / "cluster", primaries=args.primaries, replicas=args.replicas
    )
    await asyncio.to_thread(cluster.start)
    try:
        state.write_text(json.dumps({"pid": os.getpid(), "url": cluster.url}))
        print(f"REDIS_URL={cluster.url}", flush=True)
        await stop.wait()
    finally:
        state.unlink(missing_ok=True)
        cluster.stop()
    return 0


def _run_cluster(settings: Settings, args: argparse.Namespace) -> int:
    if args.cluster_command == "up":
        return asyncio.run(_run_cluster_up(settings, args))
    return _run_cluster_down(settings)


def _run_cluster_down(settings: Settings) -> int:
    """Stop the cluster ``perso cluster up`` runs: SIGTERM to it, by the pid it wrote."""
    state = settings.data_dir / "cluster.json"
    if not state.is_file():
        print(f"no cluster running ({state} does not exist)")
        return 0
    pid = int(json.loads(state.read_text())["pid"])
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        state.unlink(missing_ok=True)
        print(f"no cluster running (process {pid} is gone)")
        return 0
    print(f"stopping the cluster (process {pid})")
    return 0


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


def _stack_file(settings: Settings, explicit: Path | None) -> dict[str, object]:
    """The endpoints ``perso up`` published, or nothing when it is not running."""
    stack_file = explicit or settings.data_dir / "stack.json"
    if stack_file.is_file():
        stack: dict[str, object] = json.loads(stack_file.read_text())
        return stack
    if explicit is not None:
        raise ConfigError(f"{stack_file} does not exist (is `perso up` running?)")
    return {}


async def _run_workers_status(settings: Settings, args: argparse.Namespace) -> int:
    from perso.worker_status import report
    from redis_client.client import open_client

    redis_url = settings.redis_url or str(_stack_file(settings, args.stack).get("redis_url") or "")
    if not redis_url:
        raise ConfigError("no Redis: set REDIS_URL, or start `perso up` (it writes stack.json)")
    redis = await open_client(redis_url, socket_timeout=5.0, socket_connect_timeout=2.0)
    try:
        print(await report(redis, settings.event_partitions))
    finally:
        await redis.aclose()
    return 0


async def _run_on_logs(settings: Settings, args: argparse.Namespace) -> int:
    """``perso evaluate`` or ``perso replay`` on the Redis of REDIS_URL or of ``perso up``."""
    from perso import evaluate as evaluate_command
    from perso import replay as replay_command
    from redis_client.client import open_client

    redis_url = settings.redis_url or str(_stack_file(settings, args.stack).get("redis_url") or "")
    if not redis_url:
        raise ConfigError("no Redis: set REDIS_URL, or start `perso up` (it writes stack.json)")
    redis = await open_client(redis_url, socket_timeout=30.0, socket_connect_timeout=2.0)
    run = evaluate_command.run if args.command == "evaluate" else replay_command.run
    try:
        return await run(settings, redis, args)
    finally:
        await redis.aclose()


async def _run_load(settings: Settings, args: argparse.Namespace) -> int:
    from perso.catalog_load import load

    if not 1 <= args.batch <= 1000:
        raise ConfigError(f"--batch must be between 1 and 1000, got {args.batch}")
    stack_file = args.stack or settings.data_dir / "stack.json"
    stack = _stack_file(settings, args.stack)
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


def _run_catalog(settings: Settings, args: argparse.Namespace) -> int:
    match args.catalog_command:
        case "load":
            return asyncio.run(_run_load(settings, args))
        case "export-sample":
            return _run_export(settings, args.file)
        case _:
            return asyncio.run(_run_ingest(settings, args.recreate))


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # We use Qdrant local mode knowingly and never query it per request
    # (origin.catalog.vector_store).
    warnings.filterwarnings("ignore", message="Local mode is not recommended", category=UserWarning)


def _dispatch(settings: Settings, args: argparse.Namespace) -> int:
    match args.command:
        case "origin":
            return _run_origin(settings, args.port)
        case "edge":
            return _run_edge(settings, args.region, args.port)
        case "worker":
            if args.count < 1:
                raise ConfigError(f"--count must be at least 1, got {args.count}")
            if args.count > 1:
                return asyncio.run(_run_worker_pool(args.consumer, args.count))
            consumer = args.consumer or f"{socket.gethostname()}-{os.getpid()}"
            return asyncio.run(_run_worker(settings, consumer))
        case "up":
            return asyncio.run(_run_up(settings, args))
        case "demo":
            return asyncio.run(_run_demo(settings, args))
        case "redis":
            return asyncio.run(_run_redis(settings))
        case "cluster":
            return _run_cluster(settings, args)
        case "workers":
            return asyncio.run(_run_workers_status(settings, args))
        case "catalog":
            return _run_catalog(settings, args)
        case "evaluate" | "replay":
            return asyncio.run(_run_on_logs(settings, args))
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        overrides: dict[str, object] = {}
        if args.command == "catalog":
            if getattr(args, "size", None) is not None:
                overrides["catalog_size"] = args.size
            if getattr(args, "seed", None) is not None:
                overrides["catalog_seed"] = args.seed
        if getattr(args, "catalog", None) is not None:
            overrides["catalog"] = args.catalog
        if args.command == "up":
            # The counts of the stack: settings like their environment variables (checked
            # alike; an error names the variable).
            if args.workers is not None:
                overrides["workers"] = args.workers
            if args.regions is not None:
                overrides["regions"] = args.regions
            if args.demo:
                overrides.update(DEMO_MODE)
        settings = load_settings(**overrides)
        _configure_logging(settings.log_level)
        return _dispatch(settings, args)
    except PersoError as exc:
        print(f"perso: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 2
