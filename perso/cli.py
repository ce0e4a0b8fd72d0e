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
perso recompute               the users' models recomputed from the retained log, against the live
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

from config.environment import load_settings
from config.settings import EMPTY_CATALOG, ConfigError, Settings
from config.tls import scheme
from perso.catalog_commands import run_catalog
from perso.cli_parser import RECOMPUTE_ALIAS, parser
from perso.stack_endpoints import stack_redis_url
from protocol.exceptions import PersoError

log = logging.getLogger("perso")

# ``perso up --demo``: the storefront's token route, as ``perso demo`` runs; every other
# setting as shipped (the freshness tiers hold nothing while the workers keep up).
DEMO_MODE: dict[str, object] = {"demo_tokens": True}


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


async def _run_worker_processes(base: str | None, count: int) -> int:
    from perso.worker_processes import WorkerProcesses, consumer_names, default_consumer_base

    stop = await _stop_on_signals()
    names = consumer_names(base or default_consumer_base(), count)
    log.info("supervising %d workers: %s", count, ", ".join(names))
    workers = WorkerProcesses(names, env=os.environ)
    code = await workers.run(stop)
    log.info("worker processes stopped (%d restarts)", workers.restarts)
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


async def _run_workers_status(settings: Settings, args: argparse.Namespace) -> int:
    from perso.worker_status import report
    from redis_client.client import open_client

    redis_url = stack_redis_url(settings, args.stack)
    redis = await open_client(redis_url, socket_timeout=5.0, socket_connect_timeout=2.0)
    try:
        print(await report(redis, settings.event_partitions))
    finally:
        await redis.aclose()
    return 0


async def _run_on_logs(settings: Settings, args: argparse.Namespace) -> int:
    """``perso evaluate`` or ``perso recompute`` on the Redis of REDIS_URL or of ``perso up``."""
    from perso import evaluate as evaluate_command
    from perso import recompute as recompute_command
    from redis_client.client import open_client

    redis_url = stack_redis_url(settings, args.stack)
    redis = await open_client(redis_url, socket_timeout=30.0, socket_connect_timeout=2.0)
    run = evaluate_command.run if args.command == "evaluate" else recompute_command.run
    try:
        return await run(settings, redis, args)
    finally:
        await redis.aclose()


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
                return asyncio.run(_run_worker_processes(args.consumer, args.count))
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
            return run_catalog(settings, args)
        case "evaluate" | "recompute":
            return asyncio.run(_run_on_logs(settings, args))
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
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
        if args.command == RECOMPUTE_ALIAS:
            log.warning("perso replay is now perso recompute; the old name goes next release")
            args.command = "recompute"
        return _dispatch(settings, args)
    except PersoError as exc:
        print(f"perso: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 2
