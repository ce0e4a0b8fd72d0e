"""End-to-end: the real ``perso`` command in its own process, talked to over HTTP."""

from __future__ import annotations

import functools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from perso.user_tokens import UserTokens
from tests.pki import Pki, make_pki

STARTUP_TIMEOUT_S = 120.0


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# Where the runs are drawn from: ports the kernel never hands out to outgoing connections.
# A port in its ephemeral range may be free when checked and then be taken by one of the
# stack's own connections (to Redis, to the origin) before the process that is to listen on
# it binds it (seen: an edge of a PoP exiting with "address already in use").
LOWEST_PORT = 10_000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux; 32768 where it cannot be read)."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port_run(length: int) -> int:
    """First of ``length`` consecutive free loopback ports, below the ephemeral range."""
    rng = random.Random()
    high = max(_ephemeral_low(), LOWEST_PORT + 1_000) - length
    for _ in range(200):
        base = rng.randrange(LOWEST_PORT, high)
        if all(_free(base + i) for i in range(length)):
            return base
    raise RuntimeError("no run of free ports found")


def perso_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PERSO_") and k not in ("REDIS_URL", "QDRANT_URL")
    }
    env.update(
        PERSO_DATA_DIR=str(data_dir),
        PERSO_CATALOG_SIZE="1000",
        PERSO_EMBEDDING_DIM="32",
        PERSO_EVENT_PARTITIONS="4",
        # The tests watch the worker apply feedback within seconds: no tier holds it.
        PERSO_FRESHNESS_ACTIVE_S="0",
        PERSO_FRESHNESS_CASUAL_S="0",
    )
    env.update(extra)
    return env


@dataclass
class RunningStack:
    process: subprocess.Popen[bytes]
    output: Path
    data_dir: Path
    endpoints: dict[str, Any]

    def stop(self) -> None:
        """Ctrl-C to ``perso up`` if it still runs, and wait for it to stop everything."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(timeout=60)

    @property
    def edges(self) -> dict[str, str]:
        edges: dict[str, str] = self.endpoints["edges"]
        return edges

    @property
    def origin_url(self) -> str:
        return str(self.endpoints["origin_url"])

    @property
    def origin_headers(self) -> dict[str, str]:
        """What a caller of the origin itself (not an edge) must send."""
        return {"authorization": f"Bearer {self.endpoints['origin_token']}"}

    async def user_headers(self, client: httpx.AsyncClient, user_id: str) -> dict[str, str]:
        """What a browser of ``user_id`` sends to an edge: the token the shop's backend got
        for it from the origin with the stack's API key."""
        return await UserTokens(self.origin_url, str(self.endpoints["api_key"])).headers(
            client, user_id
        )

    @property
    def redis_url(self) -> str:
        return str(self.endpoints["redis_url"])

    def log(self) -> str:
        return self.output.read_text(errors="replace")


def tier_pki() -> Pki | None:
    """With ``PERSO_TEST_TLS=1`` (``make test-tls``), the certificates every stack of the
    session serves HTTPS with, the test process's clients trusting their CA
    (``SSL_CERT_FILE``, which httpx reads); None: plain HTTP."""
    return _session_pki() if os.environ.get("PERSO_TEST_TLS") == "1" else None


@functools.cache
def _session_pki() -> Pki:
    """One CA for the session, made on first use."""
    pki = make_pki(Path(tempfile.mkdtemp(prefix="perso-tls-")))
    os.environ["SSL_CERT_FILE"] = str(pki.ca)
    return pki


def start_stack(
    data_dir: Path, *args: str, ports: int = 4, tls: Pki | None = None, **extra: str
) -> RunningStack:
    """``perso up [args]`` on embedded defaults (no REDIS_URL: it starts its own Redis), on
    free ports (``ports`` of them in a row from the origin's), with ``extra`` settings,
    over HTTPS with ``tls``'s certificates (else ``tier_pki``'s, if any); returns once it
    has written its stack file."""
    base = free_port_run(ports)
    tls = tls or tier_pki()
    env = perso_env(
        data_dir,
        PERSO_ORIGIN_PORT=str(base),
        PERSO_EDGE_PORT_BASE=str(base + 1),
        **(tls.env() if tls is not None else {}),
        **extra,
    )
    output = data_dir / "up.out"
    with output.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "perso", "up", *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    stack_file = data_dir / "stack.json"
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not stack_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"perso up did not start:\n{output.read_text(errors='replace')}")
        time.sleep(0.1)
    return RunningStack(process, output, data_dir, json.loads(stack_file.read_text()))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(tmp_path_factory.mktemp("stack"))
    yield running
    running.stop()


def child_pid(supervisor: int, *argv: str) -> int:
    """The pid of the supervisor's child whose command line contains ``argv``."""
    children = Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()
    for pid in map(int, children):
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        if any(args[i : i + len(argv)] == list(argv) for i in range(len(args))):
            return pid
    raise AssertionError(f"no child {argv} of {supervisor}")
