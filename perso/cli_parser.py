"""The ``perso`` command's arguments: one builder per sub-command group, and ``parser()``
that assembles them (``perso.cli`` runs what they parse)."""

from __future__ import annotations

import argparse
from pathlib import Path

CATALOG_HELP = (
    "sample (generated), empty (items only through the admin API), or a JSON-lines file of "
    "items; default: PERSO_CATALOG"
)

# ``perso recompute``'s name before, still accepted (with a warning) for one release.
RECOMPUTE_ALIAS = "replay"
STACK_HELP = "stack.json of `perso up` (default: <PERSO_DATA_DIR>/stack.json)"


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="perso", description="Edge-first real-time personalization."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    _up_arguments(
        sub.add_parser(
            "up", help="start Redis, the catalog, origin, workers and one edge per region"
        )
    )
    _demo_arguments(sub.add_parser("demo", help="run the stack under simulated traffic and report"))
    _process_commands(sub)
    _redis_commands(sub)
    status = sub.add_parser("workers", help="streams and stream workers: lag, pending, figures")
    status.add_argument("--stack", type=Path, help=STACK_HELP)
    _log_commands(sub)
    _catalog_commands(sub)
    return parser


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


def _demo_arguments(demo: argparse.ArgumentParser) -> None:
    """``perso demo``'s options: the catalog, the simulated traffic, what follows it."""
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


def _process_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``perso origin``, ``edge`` and ``worker``: one process of the stack each."""
    origin = sub.add_parser("origin", help="serve the origin API")
    origin.add_argument("--port", type=int, help="default: PERSO_ORIGIN_PORT")

    edge = sub.add_parser("edge", help="serve one edge node")
    edge.add_argument("--region", help="default: PERSO_REGION")
    edge.add_argument("--port", type=int, help="default: PERSO_EDGE_PORT_BASE")

    worker = sub.add_parser("worker", help="run stream workers (--count N: N processes)")
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


def _redis_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``perso redis`` and ``perso cluster up|down``: the embedded redis-server."""
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


def _log_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``perso evaluate`` and ``perso recompute``: commands that read the logs in Redis."""
    from perso import evaluate as evaluate_command
    from perso import recompute as recompute_command

    for name, aliases, command, about in (
        (
            "evaluate",
            [],
            evaluate_command,
            "estimate candidate policies offline on the decision log",
        ),
        # ``perso replay``, the command's name before it was ``recompute``, for one release.
        (
            "recompute",
            [RECOMPUTE_ALIAS],
            recompute_command,
            "recompute the users' models from the retained log, compare",
        ),
    ):
        parser = sub.add_parser(name, aliases=aliases, help=about)
        parser.add_argument("--stack", type=Path, help=STACK_HELP)
        command.add_arguments(parser)


def _catalog_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``perso catalog ingest|load|export-sample``: the sample catalog, catalogs of your own."""
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
    load.add_argument("--stack", type=Path, help=STACK_HELP)
    export = catalog_sub.add_parser("export-sample", help="write the sample catalog as JSON lines")
    export.add_argument("file", type=Path)
    export.add_argument("--size", type=int, help="items (default: PERSO_CATALOG_SIZE)")
    export.add_argument("--seed", type=int, help="generator seed (default: PERSO_CATALOG_SEED)")
