"""Keeping child processes running: the restart policy of every supervisor we have.

``perso worker --count N`` (``perso.worker_processes``) and ``perso up`` (``perso.stack``) both
restart a child that exits on its own, after a back-off: 1 s doubling to 60 s. A child
that ran for a minute was healthy, and its exit starts the count over. A child that fails
``GIVE_UP_AFTER`` times in a row without ever running a minute is misconfigured, not
unlucky: the supervisor gives up and stops everything, so that whatever runs it (a
terminal, systemd, a container) sees an exit code instead of a restart loop.

The policy is pure (``judge_exit``, ``restart_delay``, ``describe_exit``, ``exit_report``);
``Supervised`` applies it to one child, with an injected clock, and logs every exit and
restart under ``perso.supervision``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from perso.process import Child

log = logging.getLogger("perso.supervision")

FIRST_DELAY_S = 1.0
MAX_DELAY_S = 60.0
HEALTHY_AFTER_S = 60.0  # a child that ran this long starts over at FIRST_DELAY_S
GIVE_UP_AFTER = 5  # quick failures in a row (none of them ran HEALTHY_AFTER_S)


def restart_delay(failures: int) -> float:
    """Seconds to wait before restarting a child after its ``failures``-th quick failure
    in a row (1, 2, 3, ...)."""
    if failures < 1:
        raise ValueError(f"failures must be >= 1, got {failures}")
    return min(MAX_DELAY_S, FIRST_DELAY_S * 2.0 ** (failures - 1))


@dataclass(frozen=True)
class Verdict:
    """What to do about a child that exited."""

    failures: int  # quick failures in a row, this exit included
    delay_s: float | None  # restart after this long; None: give up

    @property
    def gives_up(self) -> bool:
        return self.delay_s is None


def judge_exit(failures: int, ran_s: float) -> Verdict:
    """The verdict on a child that ran ``ran_s`` seconds and exited, after ``failures``
    quick failures in a row before this run."""
    if ran_s >= HEALTHY_AFTER_S:
        return Verdict(0, FIRST_DELAY_S)
    failures += 1
    if failures >= GIVE_UP_AFTER:
        return Verdict(failures, None)
    return Verdict(failures, restart_delay(failures))


def describe_exit(code: int) -> str:
    """``exited with code 1`` or ``was killed by SIGKILL`` (Popen's negative codes)."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


def exit_report(name: str, code: int, ran_s: float, verdict: Verdict) -> str:
    """The line an operator reads: which child, how it exited, what happens next."""
    what = f"{name} {describe_exit(code)} after {ran_s:.1f} s"
    if verdict.delay_s is None:
        return f"{what}, {verdict.failures} quick failures in a row; giving up"
    return f"{what}; restarting in {verdict.delay_s:.0f} s"


class Supervised:
    """One child, started by ``launch`` (again with the same arguments on every restart,
    so a restarted server has its port and environment back) and restarted by ``check``.

    ``launch`` must run on the main thread (``perso.process``: the parent-death signal
    is tied to the spawning thread); ``check`` is called there, from the event loop.
    """

    def __init__(
        self,
        name: str,
        launch: Callable[[], Child],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self._launch = launch
        self._clock = clock
        self._child: Child | None = None
        self._started = 0.0
        self._failures = 0
        self._restart_at: float | None = None
        self.restarts = 0

    @property
    def child(self) -> Child | None:
        """The running process; None before the start and while waiting to restart."""
        return self._child

    def start(self) -> Child:
        return self.adopt(self._launch())

    def adopt(self, child: Child) -> Child:
        """Supervise ``child``, started some other way the first time (the embedded Redis
        waits until it answers)."""
        self._child = child
        self._started = self._clock()
        self._restart_at = None
        return child

    def check(self) -> bool:
        """Note an exit, or restart the child if its back-off is over. False when the
        child keeps failing: the supervisor must give up."""
        now = self._clock()
        if self._child is not None:
            code = self._child.exited()
            if code is None:
                return True
            ran = now - self._started
            verdict = judge_exit(self._failures, ran)
            self._failures = verdict.failures
            self._child = None
            if verdict.delay_s is None:
                log.error("%s", exit_report(self.name, code, ran, verdict))
                return False
            log.warning("%s", exit_report(self.name, code, ran, verdict))
            self._restart_at = now + verdict.delay_s
        if self._restart_at is not None and now >= self._restart_at:
            child = self.start()
            self.restarts += 1
            log.info("%s restarted (pid %d, restart %d)", self.name, child.pid, self.restarts)
        return True


async def supervise(
    children: Sequence[Supervised], stop: asyncio.Event, poll_s: float = 0.5
) -> Supervised | None:
    """Check ``children`` every ``poll_s`` until ``stop`` is set (None) or one of them
    keeps failing (that one). Stopping the children is the caller's job either way."""
    while not stop.is_set():
        for child in children:
            if not child.check():
                return child
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), poll_s)
    return None
