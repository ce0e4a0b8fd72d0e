"""A real Redis Cluster started by the project: primaries and their replicas, each
the embedded ``redis-server`` (``perso.redis_server``) in cluster mode on loopback, joined
by the ``redis-cli --cluster create`` that ships beside it.

``with RedisCluster(data_dir) as cluster: use(cluster.url)``: three primaries and one
replica each by default, every slot covered, ``cluster_state:ok`` on every node before it
returns. ``url`` is ``redis-cluster://host:port,host:port,...``, every node (a client needs
one that answers to learn the rest). A primary's failure is detected within
``node_timeout_ms`` and its replica promoted by the cluster itself (``kill`` and
``wait_for_failover`` let tests and benchmarks do that on purpose).

A node's cluster bus listens on its port + 10000; both are picked free.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from perso.process import free_port
from perso.redis_server import RedisServer, RedisServerError, find_redis_server

CLUSTER_SCHEME = "redis-cluster://"
BUS_OFFSET = 10_000


class RedisCluster:
    def __init__(
        self,
        data_dir: Path,
        *,
        primaries: int = 3,
        replicas: int = 1,
        host: str = "127.0.0.1",
        persistent: bool = False,
        node_timeout_ms: int = 1000,
        ready_timeout_s: float = 30.0,
    ) -> None:
        if primaries < 3:
            raise RedisServerError("a Redis Cluster needs at least 3 primaries")
        self.data_dir = data_dir
        self.primaries = primaries
        self.replicas = replicas
        self.host = host
        self.persistent = persistent
        self.node_timeout_ms = node_timeout_ms
        self.ready_timeout_s = ready_timeout_s
        self.nodes: list[RedisServer] = []

    @property
    def addresses(self) -> list[str]:
        return [f"{self.host}:{node.port}" for node in self.nodes]

    @property
    def url(self) -> str:
        if not self.nodes:
            raise RedisServerError("the cluster is not running")
        return CLUSTER_SCHEME + ",".join(self.addresses)

    def start(self) -> RedisCluster:
        if self.nodes:
            return self
        try:
            for n in range(self.primaries * (1 + self.replicas)):
                node = RedisServer(
                    self.data_dir / f"node-{n}",
                    port=_port_with_free_bus(self.host),
                    host=self.host,
                    persistent=self.persistent,
                    extra_args=self._node_args(),
                )
                self.nodes.append(node.start())
            self._create()
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _node_args(self) -> tuple[str, ...]:
        return (
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(self.node_timeout_ms),
            # While a failed primary's replica is being promoted, the other slots keep
            # serving (the default stops the whole cluster until every slot is covered).
            "--cluster-require-full-coverage", "no",
        )  # fmt: skip

    def stop(self, grace_s: float = 10.0) -> None:
        for node in self.nodes:
            node.stop(grace_s)
        self.nodes = []

    def __enter__(self) -> RedisCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def info(self, node: RedisServer) -> dict[str, str]:
        """``CLUSTER INFO`` of ``node``, as a dictionary (empty when it does not answer)."""
        reply = _command(self.host, node.port, b"CLUSTER INFO")
        fields = (line.partition(":") for line in reply.splitlines() if ":" in line)
        return {key: value for key, _, value in fields}

    def role(self, node: RedisServer) -> str:
        """``master`` or ``slave`` as ``ROLE`` says, or "" when it does not answer."""
        reply = _command(self.host, node.port, b"ROLE")
        return "master" if "master" in reply else "slave" if "slave" in reply else ""

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Until every running node says ``cluster_state:ok`` and the cluster is
        ``settled`` (RedisServerError after ``timeout_s``)."""
        deadline = time.monotonic() + (timeout_s or self.ready_timeout_s)
        while time.monotonic() < deadline:
            running = [n for n in self.nodes if n.child is not None]
            if (
                running
                and all(self.info(n).get("cluster_state") == "ok" for n in running)
                and self.settled()
            ):
                return
            time.sleep(0.1)
        raise RedisServerError("the cluster did not reach cluster_state:ok")

    def settled(self) -> bool:
        """Every running node's view of the cluster has every slot on a node it does not
        flag as failing (``fail`` or ``fail?``). ``cluster_state:ok`` alone does not say
        so: with ``cluster-require-full-coverage no`` a node reports ok while a dead
        primary still holds slots in its view, and a client that learns the layout from it
        then sends those slots' commands to the dead node."""
        running = [n for n in self.nodes if n.child is not None]
        views = [_command(self.host, n.port, b"CLUSTER NODES", timeout_s=1.0) for n in running]
        return bool(running) and all(view and slots_served(view) for view in views)

    def primary_nodes(self) -> list[RedisServer]:
        """The running nodes that are primaries now (failovers change which)."""
        return [n for n in self.nodes if n.child is not None and self.role(n) == "master"]

    def _create(self) -> None:
        cli = find_redis_server().with_name("redis-cli")
        argv = [
            str(cli),
            "--cluster", "create", *self.addresses,
            "--cluster-replicas", str(self.replicas),
            "--cluster-yes",
        ]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0 or "[OK] All 16384 slots covered" not in done.stdout:
            raise RedisServerError(
                f"redis-cli --cluster create failed:\n{done.stdout}{done.stderr}"
            )


def slots_served(view: str) -> bool:
    """Whether no line of a ``CLUSTER NODES`` reply (a RESP bulk string) gives slots to a
    node flagged as failing: a line's flags are its third field, its slots from the
    ninth."""
    for line in view.splitlines()[1:]:  # past the bulk string's length
        fields = line.split()
        if len(fields) > 8 and "fail" in fields[2]:
            return False
    return True


def _port_with_free_bus(host: str) -> int:
    """A free port whose cluster bus port (+ 10000) is free too."""
    for _ in range(100):
        port = free_port(host)
        if port + BUS_OFFSET < 65536 and _free(host, port + BUS_OFFSET):
            return port
    raise RedisServerError("no free port pair for a cluster node")


def _free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _command(host: str, port: int | None, command: bytes, timeout_s: float = 0.5) -> str:
    """A one-line command's reply as text, "" when the node does not answer."""
    if port is None:
        return ""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(command + b"\r\n")
            return sock.recv(65536).decode(errors="replace")
    except OSError:
        return ""
