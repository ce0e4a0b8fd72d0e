"""Waiting for a process the test started to answer its ``/readyz``."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest


def wait_ready(
    url: str, process: subprocess.Popen[bytes], log: Path, *, timeout_s: float = 60.0
) -> None:
    """Returns once ``url``'s ``/readyz`` answers 200; fails the test with the end of the
    process's ``log`` if it exits first or is not ready within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{process.args!r} exited:\n{tail(log)}")
        try:
            if httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    pytest.fail(f"{process.args!r} not ready after {timeout_s:g} s:\n{tail(log)}")


def tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:]
