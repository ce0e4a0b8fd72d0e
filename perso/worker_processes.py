"""``perso worker --count N``: N stream-worker processes under one supervisor.

The worker is CPU-bound Python, so N workers are N processes (one core each), not N
tasks. Child ``i`` is ``perso worker --consumer <base>-<i>``: the consumer name is stable
across restarts, so a restarted child first re-reads the entries it still holds
(``StreamWorker`` drains its own pending list) instead of waiting for another worker
to reclaim them after ``PERSO_WORKER_CLAIM_IDLE_MS``.

A child that exits on its own is restarted under the same name, with the back-off and
give-up rule of ``perso.supervision``. SIGINT or SIGTERM reaches every child as SIGTERM;
each drains its current batch and acknowledges it, and the supervisor waits for all of them.
Children write to our stdout and stderr, so whatever runs them (a terminal, systemd, a
container) gets their logs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping

from perso.process import Child, spawn, stop_all
from perso.supervision import Supervised, supervise

log = logging.getLogger("perso.worker_processes")

STOP_GRACE_S = 30.0  # a draining worker finishes its batch and its acknowledgements


def consumer_names(base: str, count: int) -> list[str]:
    """The consumer name of each child: ``<base>-0`` ... ``<base>-<count-1>``."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    return [f"{base}-{i}" for i in range(count)]


class WorkerProcesses:
    """Supervise ``count`` worker processes until ``stop`` is set."""

    def __init__(
        self,
        consumers: list[str],
        *,
        env: Mapping[str, str],
        clock: Callable[[], float] = time.monotonic,
        argv_prefix: tuple[str, ...] = (sys.executable, "-m", "perso"),
    ) -> None:
        self._env = dict(env)
        self._argv_prefix = argv_prefix
        self._workers = [
            Supervised(f"worker {name}", self._launcher(name), clock=clock) for name in consumers
        ]

    def _launcher(self, consumer: str) -> Callable[[], Child]:
        argv = [*self._argv_prefix, "worker", "--consumer", consumer]
        return lambda: spawn(consumer, argv, self._env, None)

    async def run(self, stop: asyncio.Event, poll_s: float = 0.5) -> int:
        """0 after a requested stop, 1 if a worker kept failing."""
        for worker in self._workers:
            log.info("%s started (pid %d)", worker.name, worker.start().pid)
        try:
            gave_up = await supervise(self._workers, stop, poll_s)
        finally:
            children = [w.child for w in self._workers if w.child is not None]
            await asyncio.to_thread(stop_all, children, STOP_GRACE_S)
        return 0 if gave_up is None else 1

    @property
    def restarts(self) -> int:
        return sum(worker.restarts for worker in self._workers)

    @property
    def pids(self) -> list[int]:
        return [w.child.pid for w in self._workers if w.child is not None]


def default_consumer_base() -> str:
    """``<hostname>``: stable across restarts of the pool on one machine."""
    return os.uname().nodename or "worker"
