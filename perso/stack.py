"""The whole product on one machine: what ``perso up`` and ``perso demo`` run.

Start order: Redis (embedded unless ``REDIS_URL``: one node, or with ``redis="cluster"`` a
Redis Cluster of three primaries and a replica each, every node supervised, feedback then
acknowledged once a replica has it), the catalog (``PERSO_CATALOG``: the
sample, ingested only if missing; or one of your own, empty or from a file, which drops
sample items an earlier run left), the origin (or, with ``origins=N``, N origins on
consecutive ports: origin 0 first, the catalog origin, which owns Qdrant local mode, then
the others together, catalog replicas that load from it; with ``QDRANT_URL`` every
origin opens the server instead), the stream workers, one edge per region (or
``edges_per_region`` of them: then the processes of a region are one PoP, sharing a PoP
store in the stack's Redis for their entries, rate limits and fill leases, each on its own
port with its own sync cursor), told every origin (``PERSO_ORIGIN_URLS``); each HTTP
process must answer ``/readyz`` before the
next starts. Stop order is the
reverse, edges first so that no request is accepted while the origin goes away. Children
are separate processes that log to ``<data_dir>/logs/<name>.log``. Once started, a child
that exits on its own is restarted (``supervise``, with the back-off of
``perso.supervision``) with the arguments and environment it had: its port, the tokens,
the embedded Redis's port and data directory, so ``stack.json`` and the other processes
stay right and the edges ride out the gap on stale entries. Only a child that keeps
failing ends the stack. Children get the supervisor's settings through their environment. Without
``PERSO_ADMIN_TOKEN`` or ``PERSO_ORIGIN_TOKEN`` the stack makes random tokens (admin API;
edges to origin) and publishes them in ``stack.json`` (readable by its owner only), where
``perso catalog load`` and tests find them. Likewise the identity key edges verify user
tokens with (unless ``PERSO_IDENTITY_KEYS``), and a premium API key ``demo`` for
``POST /v1/auth/token`` (besides any ``PERSO_API_KEYS``), published as ``api_key``; with
``PERSO_DEMO_TOKENS`` (``perso up --demo``) the edges' demo token route asks with that key
unless ``PERSO_DEMO_API_KEY`` names another.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Literal

from config.environment import env_name
from config.settings import Settings
from config.tls import client_verify, scheme
from perso.local_llm import LocalLlmServer, local_settings, preflight
from perso.ports import port_plan
from perso.process import free_port, port_in_use, stop_all
from perso.redis_cluster import RedisCluster
from perso.redis_server import RedisServer
from perso.stack_catalog import ensure_catalog
from perso.stack_children import StackError, start_child, wait_ready
from perso.stack_endpoints import Endpoints, write_stack_file
from perso.stack_environment import children_env, edge_names, identity_of, stack_secrets
from perso.stack_redis import RedisMode, start_redis
from perso.supervision import Supervised, supervise

# The model behind the origin's LLM tier: whatever the settings say (LLM_BASE_URL, else
# templates only), or a local model the stack runs itself (perso.local_llm).
LlmMode = Literal["settings", "local"]


@dataclass
class _Running:
    redis: RedisServer | RedisCluster | None = None
    redis_processes: list[Supervised] = field(default_factory=list)  # the embedded servers'
    llm: LocalLlmServer | None = None
    llm_processes: list[Supervised] = field(default_factory=list)
    origin: list[Supervised] = field(default_factory=list)
    workers: list[Supervised] = field(default_factory=list)
    edges: list[Supervised] = field(default_factory=list)

    def supervised(self) -> list[Supervised]:
        """In start order: a dead Redis is restarted before the processes that need it."""
        return [
            *self.redis_processes,
            *self.llm_processes,
            *self.origin,
            *self.workers,
            *self.edges,
        ]


class Stack:
    """``async with Stack(settings) as endpoints: ...``

    ``free_ports`` picks unused ports instead of the configured ones (the demo);
    ``redis_dir`` and ``redis_persistent`` say where and how the embedded Redis keeps data,
    ``redis`` whether it is one node or a cluster (without ``REDIS_URL``), and
    ``cluster_replicas`` how many replicas each of the cluster's three primaries has;
    ``edges_per_region`` how many edge processes each region's PoP runs (more than one: they
    share a PoP store, ``PERSO_EDGE_STORE=redis`` on the stack's Redis unless the
    environment names another);
    ``publish`` writes ``<data_dir>/stack.json`` with the endpoints for other tools.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        free_ports: bool = False,
        redis_dir: Path | None = None,
        redis_persistent: bool = True,
        publish: bool = False,
        say: Callable[[str], None] = print,
        redis: RedisMode = "node",
        edges_per_region: int = 1,
        origins: int = 1,
        llm: LlmMode = "settings",
        cluster_replicas: int = 1,
    ) -> None:
        if edges_per_region < 1:
            raise StackError(f"edges per region must be at least 1, got {edges_per_region}")
        if origins < 1:
            raise StackError(f"a stack runs at least one origin, not {origins}")
        self.settings = settings
        self.redis_mode = redis
        self.edges_per_region = edges_per_region
        self.origins = origins
        self.llm = llm
        self.cluster_replicas = cluster_replicas
        self.free_ports = free_ports
        self.redis_dir = redis_dir or settings.data_dir / "redis"
        self.redis_persistent = redis_persistent
        self.publish = publish
        self.say = say
        self.logs_dir = settings.data_dir / "logs"
        self._running = _Running()
        self.endpoints: Endpoints | None = None
        self._published = False
        self._picked: set[int] = set()
        # What started the children (``add_edge`` starts more of them alike).
        self._env: dict[str, str] = {}
        # The service token of each edge process ``start`` starts, by identity.
        self._edge_tokens_given: dict[str, str] = {}
        self._me = [sys.executable, "-m", "perso"]

    async def __aenter__(self) -> Endpoints:
        try:
            return await self.start()
        except BaseException:
            await self.stop()
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def stack_file(self) -> Path:
        return self.settings.data_dir / "stack.json"

    async def start(self) -> Endpoints:
        s = self.settings
        if self.llm == "local":
            preflight(s)  # missing packages or a clash stop it before anything runs
        s.data_dir.mkdir(parents=True, exist_ok=True)
        redis_url = self._start_redis()
        await ensure_catalog(s, redis_url, self.say)
        if self.llm == "local":
            s = local_settings(s, self._start_local_llm())
            self.say(
                f"llm tier   {s.llm_small_model}, deadline {s.llm_timeout_ms} ms "
                f"(PERSO_LLM_TIMEOUT_MS), edges wait {s.origin_timeout_ms} ms for an origin"
            )

        origin_ports, edge_ports = self._ports(s)
        origin_urls = [f"{scheme(s)}://{s.host}:{port}" for port in origin_ports]
        given = stack_secrets(s, self.edges_per_region)
        self._edge_tokens_given = given.edge_tokens
        env = children_env(
            s,
            redis_url,
            origin_urls,
            given,
            redis_cluster=isinstance(self._running.redis, RedisCluster),
            per_region=self.edges_per_region,
        )
        self._env = env

        await self._start_origins(origin_urls, origin_ports, env)
        self._start_workers(s, env)
        edge_urls = await self._start_edges(edge_ports)
        edges = {region: urls[0] for region, urls in edge_urls.items()}
        self.endpoints = Endpoints(
            redis_url,
            origin_urls[0],
            edges,
            str(s.data_dir),
            given.admin_token,
            given.origin_token,
            given.api_key,
            edge_urls,
            tuple(origin_urls),
        )
        if self.publish:
            write_stack_file(self.stack_file, self.endpoints)
            self._published = True
        return self.endpoints

    def _ports(self, s: Settings) -> tuple[list[int], list[int]]:
        """The origins' ports and the edges' (the configured ones, each checked free, or
        free ones with ``free_ports``)."""
        per_region = self.edges_per_region
        planned, edge_base = port_plan(
            s.origin_port, s.edge_port_base, self.origins, len(s.regions) * per_region
        )
        origin_ports = [self._port(port, "origin_port") for port in planned]
        # Region r's n-th edge on the base port + r * per_region + n (one per region: as ever).
        edge_ports = [
            self._port(edge_base + i, "edge_port_base") for i in range(len(s.regions) * per_region)
        ]
        return origin_ports, edge_ports

    def _start_workers(self, s: Settings, env: dict[str, str]) -> None:
        for n in range(s.workers):
            name = f"worker-{n}"
            self._running.workers.append(
                self._start(name, [*self._me, "worker", "--consumer", name], env)
            )
        if s.workers:
            self.say(f"workers    {s.workers} (consumer group on {s.event_partitions} partitions)")

    async def _start_edges(self, ports: list[int]) -> dict[str, list[str]]:
        """Every region's edge processes, region r's n-th on ``ports[r * N + n]``, ready;
        their URLs by region. With more than one per region each process of the PoP keeps
        its own sync cursor in the PoP store (``PERSO_EDGE_NAME``)."""
        s, per_region, env = self.settings, self.edges_per_region, self._env
        edge_urls: dict[str, list[str]] = {}
        started: list[tuple[Supervised, str, str]] = []
        for r, region in enumerate(s.regions):
            for n, name in enumerate(edge_names(region, per_region)):
                port = ports[r * per_region + n]
                argv = [*self._me, "edge", "--region", region, "--port", str(port)]
                edge_env, label = dict(env), region
                if per_region > 1:
                    edge_env["PERSO_EDGE_NAME"], label = name, f"{region}, {name}"
                token = self._edge_tokens_given.get(identity_of(name))
                if token is not None:
                    edge_env["PERSO_EDGE_SERVICE_TOKEN"] = token
                edge = self._start(name, argv, edge_env)
                self._running.edges.append(edge)
                url = f"{scheme(s)}://{s.host}:{port}"
                edge_urls.setdefault(region, []).append(url)
                started.append((edge, url, label))
        await asyncio.gather(*(self._wait_ready(edge, url) for edge, url, _ in started))
        for _, url, label in started:
            self.say(f"edge       {url}  ({label})")
        return edge_urls

    async def _start_origins(self, urls: list[str], ports: list[int], env: dict[str, str]) -> None:
        """Origin 0 (``origin``), ready first: with Qdrant local mode it owns the store, and
        the others (``origin-1``...) are its catalog replicas, which load from it."""
        me = self._me
        first = self._start("origin", [*me, "origin", "--port", str(ports[0])], env)
        self._running.origin.append(first)
        await self._wait_ready(first, urls[0])
        many = len(urls) > 1
        self.say(f"origin     {urls[0]}" + ("  (catalog origin)" if many else ""))
        if not many:
            return
        replica_env = dict(env)
        if not self.settings.qdrant_url:
            replica_env["PERSO_CATALOG_ORIGIN_URL"] = urls[0]
        others = [
            self._start(f"origin-{n}", [*me, "origin", "--port", str(port)], replica_env)
            for n, port in enumerate(ports[1:], start=1)
        ]
        self._running.origin.extend(others)
        await asyncio.gather(
            *(self._wait_ready(o, url) for o, url in zip(others, urls[1:], strict=True))
        )
        role = "shared Qdrant server" if self.settings.qdrant_url else "catalog replica"
        for url in urls[1:]:
            self.say(f"origin     {url}  ({role})")

    async def add_edge(self, region: str, env: Mapping[str, str] | None = None) -> str:
        """One more edge process of ``region`` (of the regions started), on a free port,
        supervised and stopped with the others; returns its base URL once it is ready. A
        region's extra edge reads the same sync stream as its others: benchmarks and tests
        use it to show what every edge of a region holds. ``env`` adds to (or overrides)
        the environment the stack's edges got (``PERSO_EDGE_STORE=memory``: an edge
        outside the region's PoP store). ``endpoints`` and ``stack.json`` keep naming the
        edges ``start`` started."""
        if self.endpoints is None or region not in self.endpoints.edges:
            raise StackError(f"no edge of region {region!r} is running; start the stack first")
        self._picked.add(port := self._free_port())
        name = f"edge-{region}-{len(self._running.edges)}"
        argv = [*self._me, "edge", "--region", region, "--port", str(port)]
        # Its own sync cursor's name, should the region's edges share a PoP-local store.
        edge_env = {**self._env, "PERSO_EDGE_NAME": name, **(env or {})}
        edge = self._start(name, argv, edge_env)
        self._running.edges.append(edge)
        url = f"{scheme(self.settings)}://{self.settings.host}:{port}"
        await self._wait_ready(edge, url)
        self.say(f"edge       {url}  ({region}, {name})")
        return url

    async def start_unless(self, stop: asyncio.Event) -> Endpoints | None:
        """Start, unless ``stop`` is set first (a Ctrl-C during a long ingest or start-up):
        then cancel the start and return None. The caller still calls ``stop()``."""
        starting = asyncio.ensure_future(self.start())
        stopping = asyncio.ensure_future(stop.wait())
        done, _ = await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if starting in done:
            stopping.cancel()
            return starting.result()
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        return None

    @property
    def redis_cluster(self) -> RedisCluster | None:
        """The embedded Redis Cluster, when the stack started one."""
        redis = self._running.redis
        return redis if isinstance(redis, RedisCluster) else None

    @property
    def local_llm(self) -> LocalLlmServer | None:
        """The local model server, when the stack runs one (``llm="local"``)."""
        return self._running.llm

    def origin_names(self) -> list[str]:
        """The origin processes' names, in start order (the first holds the catalog)."""
        return [process.name for process in self._running.origin]

    def processes(self) -> dict[str, Supervised]:
        """The supervised children by name (``redis``, ``origin``, ``origin-1``...,
        ``worker-0``, ``edge-<region>``...): their current process, for tools that watch or
        kill them."""
        return {process.name: process for process in self._running.supervised()}

    async def supervise(self, stop: asyncio.Event, poll_s: float = 0.5) -> Supervised | None:
        """Keep every child running until ``stop`` is set (None): one that exits is
        restarted after a back-off, and every exit and restart is logged. Returns the child
        that kept failing, if one did; stopping the stack is then the caller's job."""
        return await supervise(self._running.supervised(), stop, poll_s)

    async def stop(self) -> None:
        running = self._running
        for group in (running.edges, running.workers, running.origin, running.llm_processes):
            children = [s.child for s in group if s.child is not None]  # None: waiting
            if children:
                await asyncio.to_thread(stop_all, children, 15.0)
            group.clear()
        running.llm = None
        running.redis_processes.clear()
        if running.redis is not None:
            await asyncio.to_thread(running.redis.stop)
            running.redis = None
        if self._published:  # never another stack's file
            self.stack_file.unlink(missing_ok=True)
            self._published = False

    def _start_redis(self) -> str:
        started = start_redis(
            self.settings,
            self.redis_dir,
            mode=self.redis_mode,
            persistent=self.redis_persistent,
            cluster_replicas=self.cluster_replicas,
            say=self.say,
        )
        self._running.redis = started.embedded
        self._running.redis_processes.extend(started.processes)
        return started.url

    def _start_local_llm(self) -> str:
        """The local model server, supervised as ``llm`` (restarted on its port); its
        ``LLM_BASE_URL``."""
        server = LocalLlmServer(
            self.logs_dir / "llm.log",
            threads=self.settings.llm_local_threads,
            host=self.settings.host,
        )
        server.start()  # from the main thread, as the embedded Redis
        self._running.llm = server
        if server.child is not None:
            process = Supervised("llm", server.relaunch)
            process.adopt(server.child)
            self._running.llm_processes.append(process)
        self.say(
            f"llm        {server.url} (llama.cpp, {server.model.name if server.model else '?'}, "
            f"{server.threads} thread{'s' if server.threads > 1 else ''})"
        )
        return server.base_url

    def _port(self, configured: int, setting: str) -> int:
        if self.free_ports:
            port = self._free_port()
            self._picked.add(port)
            return port
        if port_in_use(self.settings.host, configured):
            raise StackError(
                f"port {configured} on {self.settings.host} is in use; "
                f"set {env_name(setting)} to another port"
            )
        return configured

    def _free_port(self) -> int:
        # Each call picks a port free right now: make sure no two picks coincide.
        while (port := free_port(self.settings.host)) in self._picked:
            pass
        return port

    def _start(self, name: str, argv: list[str], env: dict[str, str]) -> Supervised:
        return start_child(name, argv, env, self.logs_dir)

    async def _wait_ready(self, process: Supervised, base_url: str) -> None:
        await wait_ready(process, base_url, client_verify(self.settings))
