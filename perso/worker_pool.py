"""``perso worker --count N``: N stream-worker processes under one supervisor.

The worker is CPU-bound Python, so N workers are N processes (one core each), not N
tasks. Child ``i`` is ``perso worker --consumer <base>-<i>``: the consumer name is stable
across restarts, so a restarted child first re-reads the entries it still holds
(``EmbeddingWorker`` drains its own pending list) instead of waiting for another worker
to reclaim them after ``PERSO_WORKER_CLAIM_IDLE_MS``.

A child that exits on its own is restarted after a backoff (1 s doubling to 60 s, reset
once it has run for a minute). A child that fails ``GIVE_UP_AFTER`` times in a row
without ever running a minute is misconfigured, not unlucky: the pool stops and exits 1.
SIGINT or SIGTERM reaches every child as SIGTERM; each drains its current batch and
acknowledges it, and the pool waits for all of them. Children write to our stdout and
stderr, so whatever runs the pool (a terminal, systemd, a container) gets their logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from perso.process import Child, spawn, stop_all

log = logging.getLogger("perso.worker_pool")

FIRST_DELAY_S = 1.0
MAX_DELAY_S = 60.0
HEALTHY_AFTER_S = 60.0  # a child that ran this long starts over at FIRST_DELAY_S
GIVE_UP_AFTER = 5  # consecutive failures, none of which ran HEALTHY_AFTER_S
STOP_GRACE_S = 30.0  # a draining worker finishes its batch and its acknowledgements


def restart_delay(failures: int) -> float:
    """Seconds to wait before restarting a child after its ``failures``-th failure in a
    row (1, 2, 3, ...)."""
    if failures < 1:
        raise ValueError(f"failures must be >= 1, got {failures}")
    return min(MAX_DELAY_S, FIRST_DELAY_S * 2.0 ** (failures - 1))


def consumer_names(base: str, count: int) -> list[str]:
    """The consumer name of each child: ``<base>-0`` ... ``<base>-<count-1>``."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    return [f"{base}-{i}" for i in range(count)]


def describe_exit(code: int) -> str:
    """``exited with code 1`` or ``was killed by SIGKILL`` (Popen's negative codes)."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


@dataclass
class _Slot:
    consumer: str
    child: Child | None = None
    started: float = 0.0
    failures: int = 0  # consecutive, reset by a healthy run
    restart_at: float | None = None


class WorkerPool:
    """Supervise ``count`` worker processes until ``stop`` is set."""

    def __init__(
        self,
        consumers: list[str],
        *,
        env: Mapping[str, str],
        clock: Callable[[], float] = time.monotonic,
        argv_prefix: tuple[str, ...] = (sys.executable, "-m", "perso"),
    ) -> None:
        self._slots = [_Slot(name) for name in consumers]
        self._env = dict(env)
        self._clock = clock
        self._argv_prefix = argv_prefix
        self.restarts = 0

    def _start(self, slot: _Slot) -> None:
        argv = [*self._argv_prefix, "worker", "--consumer", slot.consumer]
        slot.child = spawn(slot.consumer, argv, self._env, None)
        slot.started = self._clock()
        slot.restart_at = None
        log.info("worker %s started (pid %d)", slot.consumer, slot.child.pid)

    def _check(self, slot: _Slot) -> bool:
        """Restart ``slot``'s child if it is due; False when the pool must give up."""
        now = self._clock()
        if slot.child is not None:
            code = slot.child.exited()
            if code is None:
                return True
            ran = now - slot.started
            slot.failures = 1 if ran >= HEALTHY_AFTER_S else slot.failures + 1
            slot.child = None
            if slot.failures >= GIVE_UP_AFTER:
                log.error(
                    "worker %s failed %d times in a row (last: %s); giving up",
                    slot.consumer,
                    slot.failures,
                    describe_exit(code),
                )
                return False
            delay = restart_delay(slot.failures)
            slot.restart_at = now + delay
            log.warning(
                "worker %s %s after %.1f s; restarting in %.0f s",
                slot.consumer,
                describe_exit(code),
                ran,
                delay,
            )
        if slot.restart_at is not None and now >= slot.restart_at:
            self._start(slot)
            self.restarts += 1
        return True

    async def run(self, stop: asyncio.Event, poll_s: float = 0.5) -> int:
        """0 after a requested stop, 1 if a worker kept failing."""
        for slot in self._slots:
            self._start(slot)
        code = 0
        try:
            while not stop.is_set():
                if not all(self._check(slot) for slot in self._slots):
                    code = 1
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), poll_s)
        finally:
            children = [slot.child for slot in self._slots if slot.child is not None]
            await asyncio.to_thread(stop_all, children, STOP_GRACE_S)
        return code

    @property
    def pids(self) -> list[int]:
        return [slot.child.pid for slot in self._slots if slot.child is not None]


def default_consumer_base() -> str:
    """``<hostname>``: stable across restarts of the pool on one machine."""
    return os.uname().nodename or "worker"
