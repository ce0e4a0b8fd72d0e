"""Leader election on any ``coordination.lock.Lock`` backend.

The leader is whoever holds the lease on ``resource``; its term is the lease's fencing token,
so a newer leader always has a higher one and a fenced store can refuse a deposed leader.
Leadership ends when an extension is refused or cannot be made (the backend is unreachable,
so the lease may lapse unseen), when the lease's local validity runs out without a renewal
(a paused process), or on ``resign()``, which frees the resource at once for the next one.

``run()`` is the whole loop for a singleton job: campaign while a follower, renew while the
leader, and run the job periodically only while the leader, cancelling it the moment the
leadership is lost. Callers with a loop of their own call ``keep_or_campaign()`` from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import math
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from coordination.lock import Lease, Lock

log = logging.getLogger(__name__)

# The lease is trusted locally for its TTL less this share of it: the backend's clock and
# ours may run at slightly different rates (Redlock's drift allowance).
DRIFT_FACTOR = 0.01


def validity_s(ttl_ms: int, *, drift_factor: float = DRIFT_FACTOR) -> float:
    """How long after a grant or renewal *was asked for* the lease is surely still ours."""
    return ttl_ms * (1 - drift_factor) / 1000


def lease_ttl_ms(renew_every_s: float, *, missed: int = 2, slack_s: float = 0.0) -> int:
    """A TTL that survives ``missed`` renewals in a row, plus ``slack_s`` for a renewer
    whose loop can be late (a long batch between two renewals)."""
    if renew_every_s <= 0 or missed < 1 or slack_s < 0:
        raise ValueError("renew_every_s > 0, missed >= 1 and slack_s >= 0 are required")
    # Rounded before the ceiling: 16.1 s is 16100 ms, not 16101 for a float's last bit.
    return math.ceil(round(((missed + 1) * renew_every_s + slack_s) * 1000, 6))


class Step(enum.Enum):
    """What the election loop does next."""

    CAMPAIGN = "campaign"
    RENEW = "renew"
    JOB = "job"


@dataclass(frozen=True, slots=True)
class Due:
    """When each step is next due, on the election's clock (``math.inf``: not scheduled)."""

    campaign: float
    renew: float
    job: float


def next_step(leading: bool, job_running: bool, due: Due) -> tuple[Step, float]:
    """The loop's next step and when it is due. A follower only campaigns. A leader renews
    and runs its job; a renewal due no later than the job goes first, so that the job
    starts on a freshly renewed lease; a job still running is not started again."""
    if not leading:
        return Step.CAMPAIGN, due.campaign
    if job_running or due.renew <= due.job:
        return Step.RENEW, due.renew
    return Step.JOB, due.job


class LeaderElection:
    """Campaign for, keep and give up the leadership of ``resource`` on ``lock``.

    ``renew_every_s`` must be well under the TTL (``lease_ttl_ms`` picks one). ``clock`` is
    monotonic seconds: it times the lease's local validity and the loop of ``run()``.
    ``on_change`` is called with the new lease when elected and with None when the
    leadership ends; ``elected``, ``lost`` and ``resigned`` count those for metrics.
    """

    def __init__(
        self,
        lock: Lock,
        resource: str,
        ttl_ms: int,
        *,
        renew_every_s: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_change: Callable[[Lease | None], None] | None = None,
    ) -> None:
        if not 0 < renew_every_s < validity_s(ttl_ms):
            raise ValueError("renew more often than the lease's TTL")
        self.resource = resource
        self.ttl_ms = ttl_ms
        self.renew_every_s = renew_every_s
        self.elected = 0
        self.lost = 0
        self.resigned = 0
        self._lock = lock
        self._clock = clock
        self._sleep = sleep
        self._on_change = on_change
        self._lease: Lease | None = None
        self._valid_until = -math.inf

    @property
    def is_leader(self) -> bool:
        """Holding a lease that has surely not lapsed (by the local estimate)."""
        return self._lease is not None and self._clock() < self._valid_until

    @property
    def lease(self) -> Lease | None:
        """The leader's lease (``fencing``: its term), or None when not the leader."""
        return self._lease if self.is_leader else None

    async def try_become_leader(self) -> bool:
        """One campaign: True if this contender is (now or already) the leader. A backend
        failure is a lost campaign."""
        if self.is_leader:
            return True
        await self._drop_lapsed()
        # Validity counts from before the call. Cancelled mid-call, a grant we never saw
        # just lapses after its TTL.
        asked_at = self._clock()
        try:
            lease = await self._lock.try_acquire(self.resource, self.ttl_ms)
        except Exception as exc:
            log.warning("campaign for %s failed: %r", self.resource, exc)
            return False
        if lease is None:
            return False
        self._lease = lease
        self._valid_until = asked_at + validity_s(self.ttl_ms)
        self.elected += 1
        log.info("elected leader of %s (term %d)", self.resource, lease.fencing)
        if self._on_change is not None:
            self._on_change(lease)
        return True

    async def maintain(self) -> bool:
        """Extend the lease; False, and no longer the leader, when the extension is refused,
        fails, or comes after the lease's local validity ran out."""
        lease = self._lease
        if lease is None:
            return False
        if not self.is_leader:
            await self._drop_lapsed()
            return False
        asked_at = self._clock()
        try:
            kept = await self._lock.extend(lease, self.ttl_ms)
        except Exception as exc:
            # Unreachable backend: the lease may lapse without our seeing it.
            log.warning("renewal of %s failed: %r", self.resource, exc)
            kept = False
        if self._lease is not lease:  # resigned while the extension was in flight
            return False
        if not kept:
            self._step_down(resigned=False)
            return False
        self._valid_until = asked_at + validity_s(self.ttl_ms)
        return True

    async def keep_or_campaign(self) -> bool:
        """One step of a caller's own loop: renew while the leader, campaign otherwise
        (also right after losing: the lease may have lapsed with no one taking it)."""
        if self._lease is not None and await self.maintain():
            return True
        return await self.try_become_leader()

    async def resign(self) -> None:
        """Stop leading at once and free the resource for the next leader."""
        lease = self._lease
        if lease is None:
            return
        # Step down before the release: never believe we lead while the release is in flight.
        self._step_down(resigned=True)
        try:
            await self._lock.release(lease)
        except Exception as exc:  # the lease will lapse on its own
            log.warning("release of %s failed: %r", self.resource, exc)

    async def _drop_lapsed(self) -> None:
        """Step down from a lease whose local validity ran out unrenewed (a paused process),
        and release it in case it still holds, so that the next campaign need not wait for
        it to lapse in the backend too."""
        lease = self._lease
        if lease is None:
            return
        self._step_down(resigned=False)
        try:
            await self._lock.release(lease)
        except Exception as exc:
            log.warning("release of %s failed: %r", self.resource, exc)

    def _step_down(self, *, resigned: bool) -> None:
        lease, self._lease = self._lease, None
        self._valid_until = -math.inf
        if resigned:
            self.resigned += 1
        else:
            self.lost += 1
            log.warning("lost the leadership of %s", self.resource)
        if lease is not None and self._on_change is not None:
            self._on_change(None)

    async def run(
        self,
        job: Callable[[Lease], Coroutine[Any, Any, None]],
        stop: asyncio.Event,
        *,
        every_s: float,
        campaign_every_s: float | None = None,
    ) -> None:
        """Until ``stop`` is set: campaign every ``campaign_every_s`` (default: the renewal
        period) while a follower; while the leader, renew every ``renew_every_s`` and run
        ``job(lease)`` every ``every_s`` (the first run right after election). A job still
        running when the leadership is lost is cancelled; a job that raises is logged and
        run again at its next time. Resigns on the way out."""
        campaign_every = campaign_every_s if campaign_every_s is not None else self.renew_every_s
        due = Due(campaign=self._clock(), renew=math.inf, job=math.inf)
        running: asyncio.Task[None] | None = None
        try:
            while not stop.is_set():
                leading = self.is_leader
                if running is not None and (running.done() or not leading):
                    await _finish(running, cancel=not leading)
                    running = None
                    due = Due(due.campaign, due.renew, self._clock() + every_s)
                step, at = next_step(leading, running is not None, due)
                now = self._clock()
                wake = min(at, self._valid_until) if leading else at
                if wake > now:
                    await self._wait(wake - now, stop, running)
                    continue
                if step is Step.CAMPAIGN:
                    elected = await self.try_become_leader()
                    due = Due(
                        now + campaign_every,
                        now + self.renew_every_s if elected else math.inf,
                        now if elected else math.inf,
                    )
                elif step is Step.RENEW:
                    await self.maintain()
                    due = Due(due.campaign, now + self.renew_every_s, due.job)
                else:
                    lease = self.lease
                    if lease is not None:  # checked again: the job runs only for a leader
                        running = asyncio.create_task(job(lease), name=f"leader:{self.resource}")
                    due = Due(due.campaign, due.renew, math.inf)
        finally:
            if running is not None:
                await _finish(running, cancel=True)
            await self.resign()

    async def _wait(
        self, seconds: float, stop: asyncio.Event, running: asyncio.Task[None] | None
    ) -> None:
        """Sleep ``seconds``, cut short by ``stop`` or by the end of the running job."""
        sleeper = asyncio.ensure_future(self._sleep(seconds))
        stopper = asyncio.ensure_future(stop.wait())
        waited: set[asyncio.Future[Any]] = {sleeper, stopper}
        if running is not None:
            waited.add(running)
        try:
            await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for future in (sleeper, stopper):
                future.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await future


async def _finish(task: asyncio.Task[None], *, cancel: bool) -> None:
    """Reap a job task (cancelled first when the leadership is gone), logging its failure.
    ``asyncio.wait`` does not raise the task's own cancellation, only ours."""
    if cancel:
        task.cancel()
    await asyncio.wait({task})
    if not task.cancelled() and task.exception() is not None:
        log.error("leader job failed", exc_info=task.exception())
