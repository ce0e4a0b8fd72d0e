"""The stack's Redis: the one of ``REDIS_URL``, else an embedded one it starts, one node
or a Redis Cluster (``redis="cluster"``), each server supervised."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from config.settings import Settings
from perso.redis_cluster import RedisCluster
from perso.redis_server import RedisServer
from perso.supervision import Supervised

RedisMode = Literal["node", "cluster"]


@dataclass
class StackRedis:
    url: str
    embedded: RedisServer | RedisCluster | None = None  # None: REDIS_URL's
    processes: list[Supervised] = field(default_factory=list)  # the embedded servers'


def start_redis(
    settings: Settings,
    redis_dir: Path,
    *,
    mode: RedisMode,
    persistent: bool,
    cluster_replicas: int,
    say: Callable[[str], None],
) -> StackRedis:
    if settings.redis_url:
        say(f"redis      {settings.redis_url} (REDIS_URL)")
        return StackRedis(settings.redis_url)
    if mode == "cluster":
        return _start_cluster(settings, redis_dir, persistent, cluster_replicas, say)
    server = RedisServer(
        redis_dir,
        host=settings.host,
        persistent=persistent,
        binary=settings.redis_server_bin,
    )
    # Started from the main thread: its parent-death signal is tied to this thread.
    server.start()
    started = StackRedis(server.url, server, _supervised("redis", server))
    say(f"redis      {server.url} (embedded, data in {redis_dir})")
    return started


def _start_cluster(
    settings: Settings,
    redis_dir: Path,
    persistent: bool,
    replicas: int,
    say: Callable[[str], None],
) -> StackRedis:
    cluster = RedisCluster(
        redis_dir / "cluster",
        host=settings.host,
        persistent=persistent,
        replicas=replicas,
    )
    cluster.start()  # from the main thread, as a single server is
    started = StackRedis(cluster.url, cluster)
    for n, node in enumerate(cluster.nodes):
        # A node restarted on its port and directory rejoins with its identity (its
        # nodes.conf): as a replica, if its replica was promoted meanwhile.
        started.processes.extend(_supervised(f"redis-{n}", node))
    say(
        f"redis      {cluster.url} (embedded cluster: {cluster.primaries} primaries, "
        f"{cluster.replicas} {'replica' if cluster.replicas == 1 else 'replicas'} each, "
        f"data in {cluster.data_dir})"
    )
    return started


def _supervised(name: str, server: RedisServer) -> list[Supervised]:
    if server.child is None:
        return []
    process = Supervised(name, server.relaunch)
    process.adopt(server.child)
    return [process]
