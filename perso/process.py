"""Child processes of the supervisor: spawned in their own session, tied to our lifetime.

Each child gets its own process group, so a Ctrl-C in the terminal reaches only the
supervisor, which then stops the children in order. On Linux each child also asks the
kernel for SIGTERM when its parent dies, so a supervisor killed with SIGKILL leaves no
orphaned servers behind. Spawn only from the main thread: the parent-death signal fires
when the spawning *thread* exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

_PR_SET_PDEATHSIG = 1
# Loaded in the parent: the child between fork and exec should do as little as it can.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _die_with(parent_pid: int) -> Callable[[], None]:
    def before_exec() -> None:  # pragma: no cover - runs in the child before exec
        if _LIBC is None:
            return
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent_pid:  # the parent died before the signal was armed
            os._exit(1)

    return before_exec


@dataclass
class Child:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path | None  # None: the child writes to our stdout and stderr

    @property
    def pid(self) -> int:
        return self.popen.pid

    def exited(self) -> int | None:
        """Exit code if the process has ended, else None."""
        return self.popen.poll()


def spawn(
    name: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    log_path: Path | None,
    *,
    pass_fds: Sequence[int] = (),
) -> Child:
    """Start ``argv`` with stdout and stderr appended to ``log_path`` (None: inherited
    from us); ``pass_fds`` stay open in the child."""
    with contextlib.ExitStack() as files:
        log: int | IO[bytes] | None = None
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log = files.enter_context(log_path.open("ab"))
        popen = subprocess.Popen(
            list(argv),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT if log is not None else None,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
            preexec_fn=_die_with(os.getpid()),  # noqa: PLW1509 - main thread only, see module doc
        )
    return Child(name, popen, log_path)


def stop(child: Child, grace_s: float = 10.0) -> int:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL. Returns the exit code."""
    stop_all([child], grace_s)
    return child.popen.wait()


def log_tail(path: Path | None, lines: int = 20) -> str:
    """Last ``lines`` lines of a child's log, for error messages."""
    if path is None:
        return ""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 16_384))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago; callers retry if it is taken before they bind."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def stop_all(children: Sequence[Child], grace_s: float = 10.0) -> None:
    """SIGTERM every child at once, then wait for each within one shared ``grace_s``."""
    for child in children:
        if child.exited() is None:
            with contextlib.suppress(ProcessLookupError):
                child.popen.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for child in children:
        try:
            child.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                child.popen.kill()
            child.popen.wait()
