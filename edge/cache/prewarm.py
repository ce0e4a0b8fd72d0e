"""Layer 3 of layered invalidation: pre-warm the entry a returning user will ask
for next, in the background and within a budget.

A power or active user's key includes their last interactions (the segment cache key), so every
interaction that passes through the edge moves their next request to a key nobody has
filled: a miss, on the request path. Once the interaction has had time to reach the
user's embedding (the settle window, ``invalidation.ttl``), the edge fills that new key
itself, with the user's last request (page, device, filters) as the model of the next
one. The user's next request then hits, and the fill's cost moved off their path.

Bounded: the last request of at most ``max_users`` users is remembered, one pre-warm per
user is pending at a time (a later interaction pushes it back), and a token bucket caps
pre-warms per second, so that a burst of feedback cannot turn into a burst of origin
calls. A pre-warm that finds the key filled (the user came back first) costs nothing; one
that fails is dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from protocol.api import PersonalizeRequest
from resilience.token_bucket import TokenBucket

log = logging.getLogger(__name__)


@dataclass
class PrewarmCounters:
    scheduled: int = 0
    rescheduled: int = 0  # a later interaction pushed a pending pre-warm back
    filled: int = 0
    already_filled: int = 0
    over_budget: int = 0
    failed: int = 0


class Prewarmer:
    def __init__(
        self,
        *,
        clock: Callable[[], float],
        per_second: float,
        delay_s: float,
        max_users: int = 100_000,
    ) -> None:
        self._clock = clock
        self._budget = TokenBucket(per_second, clock()) if per_second > 0 else None
        self._delay_s = delay_s
        self._max_users = max_users
        self._last: OrderedDict[str, PersonalizeRequest] = OrderedDict()
        self._pending: dict[str, asyncio.Task[None]] = {}
        self.counters = PrewarmCounters()

    def remember(self, body: PersonalizeRequest) -> None:
        """The user's latest request: the model of their next one."""
        last = self._last
        last[body.user_id] = body
        last.move_to_end(body.user_id)
        if len(last) > self._max_users:
            last.popitem(last=False)

    def schedule(self, user_id: str, warm: Callable[[PersonalizeRequest], Awaitable[bool]]) -> bool:
        """After the settle delay, ``warm(last request)`` (which fills the key if it is
        not already there and says whether it filled). A pre-warm still waiting for an
        earlier interaction is replaced (its key would include this one, and it would fire
        before this one settled) without charging the budget again. False when nothing was
        scheduled: the user made no request here, or the budget is spent."""
        body = self._last.get(user_id)
        if body is None or self._budget is None:
            return False
        pending = self._pending.pop(user_id, None)
        if pending is not None:
            pending.cancel()
            self.counters.rescheduled += 1
        elif self._budget.take(self._clock()) > 0:
            self.counters.over_budget += 1
            return False
        else:
            self.counters.scheduled += 1
        task = asyncio.get_running_loop().create_task(self._run(user_id, body, warm))
        self._pending[user_id] = task
        return True

    async def _run(
        self,
        user_id: str,
        body: PersonalizeRequest,
        warm: Callable[[PersonalizeRequest], Awaitable[bool]],
    ) -> None:
        try:
            await asyncio.sleep(self._delay_s)
            if await warm(body):
                self.counters.filled += 1
            else:
                self.counters.already_filled += 1
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an origin error: the user's next request fills instead
            self.counters.failed += 1
            log.info("pre-warm for %s dropped: %s", user_id, exc)
        finally:
            if self._pending.get(user_id) is asyncio.current_task():
                del self._pending[user_id]

    async def aclose(self) -> None:
        tasks = list(self._pending.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
