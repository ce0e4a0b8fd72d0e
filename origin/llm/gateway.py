"""The LLM gateway: every call to a model server goes through it.

In order, a call meets:

- the **cost tracker**: the day's spend of every origin process together, in Redis; once
  it reaches ``llm_daily_budget_usd`` the tier is template-only until the next UTC day;
- the **model router**: the small or the large model as asked, or the other one when the
  asked one's breaker is open, it is backing off after a 429 or it fails ("route to backup
  model");
- the **rate limiter**: a token bucket (``resilience.token_bucket``) of ``llm_rate_per_s``
  per process, one second of burst;
- one **circuit breaker** per endpoint (``resilience.circuit_breaker``): timeouts and
  failures open it, so a slow or dead server costs nothing while it is open;
- the **retry**: an answer that does not parse is asked for once more within the same
  deadline (an invalid response: retry once, then template).

Every refusal and failure is a typed ``LlmError``; the caller answers from templates.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Generic, TypeVar

from redis.exceptions import RedisError

from config.settings import Settings
from origin.exceptions import (
    InvalidLlmResponse,
    LlmBudgetExceeded,
    LlmCircuitOpen,
    LlmError,
    LlmRateLimited,
    LlmTimeout,
    LlmUnavailable,
)
from origin.llm.client import LlmClient, ModelEndpoint, endpoints_from_settings
from origin.llm.model import Completion, ModelSize, Prompt
from protocol import keys
from redis_client.client import RedisClient
from resilience.backoff import jittered, step
from resilience.circuit_breaker import CircuitBreaker, State
from resilience.token_bucket import TokenBucket

T = TypeVar("T")

# After a 429 without Retry-After: 1 s, doubling per 429 in a row, at most 30 s, each drawn
# from the top quarter below the step so that processes refused together do not all come
# back in the same instant.
BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 30.0
BACKOFF_JITTER = 0.25
# A server's own Retry-After is honoured up to this: beyond it we would rather probe.
MAX_RETRY_AFTER_S = 300.0
# Less time than this left in the deadline: no new request (a retry or a failover).
MIN_CALL_MS = 5.0

OUTCOMES = (
    "ok",
    "timeout",
    "rate_limited",
    "invalid",
    "unavailable",
    "budget",
    "breaker_open",
    "error",
)


def backoff_delay_s(rate_limited_in_a_row: int, u: float) -> float:
    """How long to leave an endpoint alone after its ``rate_limited_in_a_row``-th 429 in a
    row (>= 1); ``u`` in [0, 1) is the jitter draw."""
    if rate_limited_in_a_row < 1:
        raise ValueError(f"rate_limited_in_a_row must be >= 1, got {rate_limited_in_a_row}")
    wait = step(rate_limited_in_a_row - 1, BACKOFF_BASE_S, BACKOFF_CAP_S)
    return jittered(wait, u, "shaved", fraction=BACKOFF_JITTER)


def utc_day(unix_time: float) -> str:
    """``YYYY-MM-DD`` of a Unix time in UTC: the day a spend counts against."""
    return datetime.fromtimestamp(unix_time, UTC).strftime("%Y-%m-%d")


class CostTracker:
    """The day's spend on model calls, shared by every origin process through Redis.

    Kept off the request's critical path: the spend is read from Redis at most once a
    second (``REFRESH_S``) and what this process spends is added to it locally at once and
    written to Redis in the background. So the budget can be overrun by what the other
    origins spent in the last second: cents, against a daily budget in dollars.
    """

    REFRESH_S = 1.0

    def __init__(
        self,
        redis: RedisClient,
        daily_budget_usd: float,
        *,
        wall_clock: Callable[[], float],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._redis = redis
        self.daily_budget_usd = daily_budget_usd
        self._wall_clock = wall_clock
        self._clock = clock
        self._day = ""
        self._spent = 0.0
        self._read_at = -math.inf
        self._pending: set[asyncio.Task[None]] = set()

    def _key(self) -> str:
        return keys.llm_cost(utc_day(self._wall_clock()))

    async def spent_today(self) -> float:
        day = utc_day(self._wall_clock())
        now = self._clock()
        if day != self._day or now - self._read_at >= self.REFRESH_S:
            raw = await self._redis.get(keys.llm_cost(day))
            self._day, self._spent, self._read_at = day, float(raw or 0.0), now
        return self._spent

    async def budget_left(self) -> float:
        """US dollars left today; <= 0 means template-only."""
        return self.daily_budget_usd - await self.spent_today()

    async def add(self, usd: float) -> float:
        """Adds ``usd`` to today's spend in Redis; returns the total."""
        key = self._key()
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.incrbyfloat(key, usd)
            pipe.expire(key, keys.LLM_COST_TTL_S)
            total, _ = await pipe.execute()
        self._day, self._spent, self._read_at = (
            utc_day(self._wall_clock()),
            float(total),
            self._clock(),
        )
        return float(total)

    def record(self, usd: float, *, on_error: Callable[[], None]) -> None:
        """Adds ``usd`` here at once and to Redis in the background; ``on_error`` is called
        if Redis does not take it (the answer is paid for either way)."""
        self._spent += usd

        async def write() -> None:
            try:
                await self.add(usd)
            except RedisError:
                on_error()

        task = asyncio.create_task(write())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def flush(self) -> None:
        """Waits for the background writes (tests, shutdown)."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)


@dataclass
class GatewayCounters:
    """Plain numbers, read by the metrics endpoint at scrape time."""

    # complete() calls by how they ended (OUTCOMES)
    calls: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    requests: int = 0  # HTTP requests sent to model servers
    retries: int = 0  # second requests after an answer that did not parse
    failovers: int = 0  # requests sent to the other model than the one asked for
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_unrecorded: int = 0  # calls whose cost Redis did not take


@dataclass(frozen=True, slots=True)
class Answer(Generic[T]):
    """A parsed answer, the completion it came from and what the whole call cost."""

    value: T
    completion: Completion
    size: ModelSize  # the model that answered (the other one after a failover)
    cost_usd: float
    requests: int


@dataclass
class _Route:
    endpoint: ModelEndpoint
    breaker: CircuitBreaker
    backoff_until: float = 0.0
    rate_limited_in_a_row: int = 0


def default_breaker(clock: Callable[[], float]) -> CircuitBreaker:
    return CircuitBreaker(clock=clock, failure_threshold=5, open_s=5.0)


class LlmGateway:
    def __init__(
        self,
        client: LlmClient,
        endpoints: Sequence[ModelEndpoint],
        redis: RedisClient,
        *,
        daily_budget_usd: float,
        rate_per_s: float,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        breaker: Callable[[Callable[[], float]], CircuitBreaker] = default_breaker,
    ) -> None:
        sizes = sorted(e.size for e in endpoints)
        if sizes != ["large", "small"]:
            raise ValueError(f"need one small and one large endpoint, got {sizes}")
        self._client = client
        self._routes = {e.size: _Route(e, breaker(clock)) for e in endpoints}
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self.limiter = TokenBucket(rate_per_s, clock())
        self.cost = CostTracker(redis, daily_budget_usd, wall_clock=wall_clock, clock=clock)
        self.counters = GatewayCounters()

    @classmethod
    def from_settings(
        cls, settings: Settings, redis: RedisClient, client: LlmClient
    ) -> LlmGateway | None:
        """None when no model server is configured."""
        endpoints = endpoints_from_settings(settings)
        if endpoints is None:
            return None
        return cls(
            client,
            endpoints,
            redis,
            daily_budget_usd=settings.llm_daily_budget_usd,
            rate_per_s=settings.llm_rate_per_s,
        )

    def endpoint(self, size: ModelSize) -> ModelEndpoint:
        return self._routes[size].endpoint

    def breaker_state(self, size: ModelSize) -> State:
        return self._routes[size].breaker.state

    def backing_off_s(self, size: ModelSize) -> float:
        """Seconds the endpoint is still left alone after a 429; 0.0 when not."""
        return max(0.0, self._routes[size].backoff_until - self._clock())

    def would_limit(self) -> bool:
        """Would a call now be refused without a request (the trigger evaluator's
        ``rate_limited``)? Our own limiter is empty, or every endpoint is backing off."""
        now = self._clock()
        return self.limiter.wait_s(now) > 0.0 or all(
            r.backoff_until > now for r in self._routes.values()
        )

    async def budget_left(self) -> float:
        return await self.cost.budget_left()

    async def complete(
        self,
        prompt: Prompt,
        size: ModelSize,
        *,
        deadline_ms: float,
        parse: Callable[[Completion], T],
        invalid: tuple[type[Exception], ...] = (InvalidLlmResponse,),
    ) -> Answer[T]:
        """``parse`` of the model's answer to ``prompt``, within ``deadline_ms`` in all.
        An exception of a type in ``invalid`` from ``parse`` earns one retry; a second one
        is raised. Everything else that goes wrong is an ``LlmError``."""
        try:
            answer = await self._complete(prompt, size, deadline_ms, parse, invalid)
        except Exception as exc:
            self.counters.calls[_outcome_of(exc, invalid)] += 1
            raise
        self.counters.calls["ok"] += 1
        return answer

    async def _complete(
        self,
        prompt: Prompt,
        size: ModelSize,
        deadline_ms: float,
        parse: Callable[[Completion], T],
        invalid: tuple[type[Exception], ...],
    ) -> Answer[T]:
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_ms / 1000
        try:
            left = await self.cost.budget_left()
        except RedisError as exc:
            # Spend we cannot see is spend we cannot allow.
            raise LlmUnavailable(f"cannot read the day's LLM spend: {exc!r}") from exc
        if left <= 0:
            raise LlmBudgetExceeded(
                f"the day's LLM budget of ${self.cost.daily_budget_usd:.2f} is spent"
            )
        cost = 0.0
        requests = 0
        while True:
            completion, route = await self._call(prompt, size, end)
            requests += 1
            cost += await self._account(route.endpoint, completion)
            try:
                value = parse(completion)
            except invalid:
                if requests > 1 or (end - loop.time()) * 1000 < MIN_CALL_MS:
                    raise
                self.counters.retries += 1
                continue
            return Answer(value, completion, route.endpoint.size, cost, requests)

    async def _call(self, prompt: Prompt, size: ModelSize, end: float) -> tuple[Completion, _Route]:
        """One request to the asked model, or to the other one when the asked one cannot
        take it."""
        loop = asyncio.get_running_loop()
        other: ModelSize = "large" if size == "small" else "small"
        order = (self._routes[size], self._routes[other])
        failure: LlmError | None = None
        backoffs: list[float] = []
        open_for: list[float] = []
        for route in order:
            now = self._clock()
            if route.backoff_until > now:
                backoffs.append(route.backoff_until - now)
                continue
            if not route.breaker.allow():
                open_for.append(route.breaker.retry_after_s())
                continue
            remaining_ms = (end - loop.time()) * 1000
            if remaining_ms < MIN_CALL_MS:
                route.breaker.abandon()
                raise failure or LlmTimeout("the deadline was spent before the call")
            if wait_s := self.limiter.take(self._clock()):
                route.breaker.abandon()
                raise LlmRateLimited("over llm_rate_per_s in this process", wait_s)
            if route is not order[0]:
                self.counters.failovers += 1
            self.counters.requests += 1
            try:
                completion = await self._client.complete(
                    route.endpoint, prompt, deadline_ms=remaining_ms
                )
            except LlmTimeout:
                route.breaker.record_failure()
                raise
            except LlmRateLimited as exc:
                # The server is up, only busy: no breaker failure, but leave it alone.
                route.breaker.abandon()
                self._back_off(route, exc.retry_after_s)
                failure = exc
                continue
            except LlmUnavailable as exc:
                route.breaker.record_failure()
                failure = exc
                continue
            except BaseException:
                route.breaker.abandon()
                raise
            route.breaker.record_success()
            route.rate_limited_in_a_row = 0
            return completion, route
        if failure is not None:
            raise failure
        if backoffs:
            raise LlmRateLimited("every model endpoint is backing off after a 429", min(backoffs))
        raise LlmCircuitOpen("every model endpoint's circuit breaker is open", min(open_for))

    def _back_off(self, route: _Route, retry_after_s: float | None) -> None:
        route.rate_limited_in_a_row += 1
        if retry_after_s is not None and math.isfinite(retry_after_s):
            delay = min(max(0.0, retry_after_s), MAX_RETRY_AFTER_S)
        else:
            delay = backoff_delay_s(route.rate_limited_in_a_row, self._rng.random())
        route.backoff_until = self._clock() + delay

    async def _account(self, endpoint: ModelEndpoint, completion: Completion) -> float:
        usd = endpoint.cost_usd(completion)
        counters = self.counters
        counters.input_tokens += completion.input_tokens
        counters.output_tokens += completion.output_tokens
        counters.cost_usd += usd
        # Losing the sum only loosens the budget: it is written in the background.
        self.cost.record(usd, on_error=self._unrecorded)
        return usd

    def _unrecorded(self) -> None:
        self.counters.cost_unrecorded += 1


def _outcome_of(exc: Exception, invalid: tuple[type[Exception], ...]) -> str:
    if isinstance(exc, LlmBudgetExceeded):
        return "budget"
    if isinstance(exc, LlmCircuitOpen):
        return "breaker_open"
    if isinstance(exc, LlmTimeout):
        return "timeout"
    if isinstance(exc, LlmRateLimited):
        return "rate_limited"
    if isinstance(exc, invalid):
        return "invalid"
    if isinstance(exc, LlmUnavailable):
        return "unavailable"
    return "error"
