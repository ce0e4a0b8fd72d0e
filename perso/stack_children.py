"""Starting the stack's child processes: each supervised, logging to its own file, and
waited for until it answers ``/readyz``."""

from __future__ import annotations

import asyncio
import ssl
import time
from pathlib import Path

import httpx

from perso.process import Child, log_tail, spawn
from perso.supervision import Supervised
from protocol.exceptions import PersoError

READY_TIMEOUT_S = 180.0  # the origin loads the catalog first: 100K items take ~10 s


class StackError(PersoError):
    """A process of the stack could not be started or stopped as planned."""


def start_child(name: str, argv: list[str], env: dict[str, str], logs_dir: Path) -> Supervised:
    """Start a supervised child; a restart runs the same ``argv`` in the same ``env``."""
    log_path = logs_dir / f"{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)

    def launch() -> Child:
        with log_path.open("a") as log:
            log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} starting {name}\n")
        return spawn(name, argv, env, log_path)

    child = Supervised(name, launch)
    child.start()
    return child


async def wait_ready(process: Supervised, base_url: str, verify: ssl.SSLContext | bool) -> None:
    """Until ``process`` answers ``base_url``/readyz with 200 (``verify``: what its
    certificate is verified with); ``StackError`` if it exits or takes too long."""
    child = process.child
    if child is None:  # only ``supervise`` leaves a dead child's place empty
        raise StackError(f"{process.name} is not running")
    deadline = time.monotonic() + READY_TIMEOUT_S
    async with httpx.AsyncClient(timeout=2.0, verify=verify) as client:
        while True:
            code = child.exited()
            if code is not None:
                raise StackError(
                    f"{child.name} exited with code {code} while starting; "
                    f"last lines of {child.log_path}:\n{log_tail(child.log_path)}"
                )
            try:
                if (await client.get(f"{base_url}/readyz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise StackError(
                    f"{child.name} not ready after {READY_TIMEOUT_S:.0f}s; see {child.log_path}"
                )
            await asyncio.sleep(0.1)
