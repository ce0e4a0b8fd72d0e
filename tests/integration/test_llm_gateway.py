"""The LLM gateway against the fake model server (a real process) and the real Redis: one
test per row of seed 000's LLM failure table, plus the rate limiter and the shared budget."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from redis.asyncio import Redis

from origin.exceptions import (
    InvalidLlmResponse,
    LlmBudgetExceeded,
    LlmCircuitOpen,
    LlmRateLimited,
    LlmTimeout,
    LlmUnavailable,
)
from origin.llm.client import LlmClient, ModelEndpoint
from origin.llm.gateway import LlmGateway, utc_day
from origin.llm.model import Completion, Prompt
from origin.llm.response import from_completion
from perso.process import free_port
from protocol import keys
from resilience.circuit_breaker import CircuitBreaker, State
from tests.fakes import FakeClock
from tests.llm_fixtures import LlmServer

PROMPT = Prompt(
    system="You are a personalization assistant. Answer in JSON.",
    user='Explain why "Aurora Headphones" is recommended for this user.',
    max_output_tokens=200,
    input_tokens=30,
)
SMALL_PRICE = 0.0002
LARGE_PRICE = 0.0009
# Scheduling slack on top of a deadline on a loaded 2-core machine.
SLACK_MS = 60


def parse(completion: Completion) -> dict[str, Any]:
    try:
        data = json.loads(completion.content)
    except ValueError as exc:
        raise InvalidLlmResponse(f"not JSON: {exc}") from exc
    if not isinstance(data, dict) or "headline" not in data:
        raise InvalidLlmResponse("no headline")
    return data


def endpoints(base_url: str, *, large_url: str | None = None) -> list[ModelEndpoint]:
    return [
        ModelEndpoint("small", base_url, "small-model", SMALL_PRICE, api_key="sk-test"),
        ModelEndpoint("large", large_url or base_url, "large-model", LARGE_PRICE, "sk-test"),
    ]


@pytest.fixture
async def client() -> AsyncIterator[LlmClient]:
    c = LlmClient()
    yield c
    await c.aclose()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_gateway(
    client: LlmClient, redis: Redis, llm: LlmServer, clock: FakeClock
) -> Callable[..., LlmGateway]:
    def make(
        *,
        budget: float = 10.0,
        rate: float = 100.0,
        threshold: int = 2,
        large_url: str | None = None,
    ) -> LlmGateway:
        return LlmGateway(
            client,
            endpoints(llm.base_url, large_url=large_url),
            redis,
            daily_budget_usd=budget,
            rate_per_s=rate,
            clock=clock,
            wall_clock=clock,
            breaker=lambda c: CircuitBreaker(clock=c, failure_threshold=threshold, open_s=5.0),
        )

    return make


async def test_good_answer_is_parsed_and_paid_for(
    make_gateway: Callable[..., LlmGateway], llm: LlmServer, redis: Redis, clock: FakeClock
) -> None:
    gateway = make_gateway()
    answer = await gateway.complete(PROMPT, "small", deadline_ms=1000, parse=parse)
    assert "Aurora Headphones" in answer.value["headline"]
    assert answer.size == "small"
    assert answer.requests == 1
    completion = answer.completion
    assert completion.model == "small-model"
    assert completion.input_tokens > 0
    assert completion.output_tokens > 0
    expected = (completion.input_tokens + completion.output_tokens) * SMALL_PRICE / 1000
    assert answer.cost_usd == pytest.approx(expected)
    await gateway.cost.flush()  # written in the background
    key = keys.llm_cost(utc_day(clock()))
    assert float(await redis.get(key)) == pytest.approx(expected)
    assert 0 < await redis.ttl(key) <= keys.LLM_COST_TTL_S
    assert await gateway.budget_left() == pytest.approx(10.0 - expected)
    stats = await llm.stats()
    assert stats["by_model"] == {"small-model": 1}
    assert stats["with_bearer"] == 1
    assert gateway.counters.calls["ok"] == 1
    assert gateway.counters.requests == 1


async def test_timeout_within_deadline_then_breakers_open(
    make_gateway: Callable[..., LlmGateway], llm: LlmServer, clock: FakeClock
) -> None:
    """Seed 000 "LLM Timeout": latency > budget -> LlmTimeout in time; the breakers open."""
    gateway = make_gateway(threshold=2)
    await llm.control(mode="slow", slow_ms=2000)
    for _ in range(2):
        started = time.perf_counter()
        with pytest.raises(LlmTimeout):
            await gateway.complete(PROMPT, "small", deadline_ms=100, parse=parse)
        assert (time.perf_counter() - started) * 1000 < 100 + SLACK_MS
    assert gateway.breaker_state("small") is State.OPEN
    # The small model's breaker is open: the large one is tried (and times out too).
    for _ in range(2):
        with pytest.raises(LlmTimeout):
            await gateway.complete(PROMPT, "small", deadline_ms=100, parse=parse)
    assert gateway.breaker_state("large") is State.OPEN
    assert gateway.counters.failovers == 2
    # Both open: refused at once, no request.
    started = time.perf_counter()
    with pytest.raises(LlmCircuitOpen):
        await gateway.complete(PROMPT, "small", deadline_ms=100, parse=parse)
    assert (time.perf_counter() - started) * 1000 < 50
    assert (await llm.stats())["requests"] == 4
    assert gateway.counters.calls["timeout"] == 4
    assert gateway.counters.calls["breaker_open"] == 1
    # After the cooldown a probe goes through and closes the breaker.
    await llm.control(mode="good")
    clock.tick(5.1)
    answer = await gateway.complete(PROMPT, "small", deadline_ms=1000, parse=parse)
    assert answer.size == "small"
    assert gateway.breaker_state("small") is State.CLOSED


async def test_hanging_server_times_out_within_deadline(
    make_gateway: Callable[..., LlmGateway], llm: LlmServer
) -> None:
    gateway = make_gateway()
    await llm.control(mode="hang")
    started = time.perf_counter()
    with pytest.raises(LlmTimeout):
        await gateway.complete(PROMPT, "large", deadline_ms=150, parse=parse)
    assert (time.perf_counter() - started) * 1000 < 150 + SLACK_MS


async def test_rate_limited_backs_off_without_requests(
    make_gateway: Callable[..., LlmGateway], llm: LlmServer, clock: FakeClock
) -> None:
    """Seed 000 "Rate Limit Exceeded": 429 -> LlmRateLimited, exponential backoff."""
    gateway = make_gateway()
    await llm.control(mode="rate_limited", retry_after_s=None)
    with pytest.raises(LlmRateLimited):
        await gateway.complete(PROMPT, "small", deadline_ms=1000, parse=parse)
    # Both models were asked (the second as the backup) and both said 429.
    assert (await llm.stats())["by_status"] == {"429": 2}
    # First backoff: 1 s, jittered down by at most a quarter.
    assert 0.75 <= gateway.backing_off_s("small") <= 1.0
    assert gateway.would_limit()
    # During the backoff nothing is sent, even though the server is fine again.
    await llm.control(mode="good")
    with pytest.raises(LlmRateLimited) as refused:
        await gateway.complete(PROMPT, "small", deadline_ms=1000, parse=parse)
    assert refused.value.retry_after_s is not None
    assert 0 < refused.value.retry_after_s <= 1.0
    assert (await llm.stats())["requests"] == 2
    # Breakers are not what refuses: they stay closed.
    assert gateway.breaker_state("small") is State.CLOSED
    clock.tick(1.01)
    assert not gateway.would_limit()
    answer = await gateway.complete(PROMPT, "small", deadline_ms=1000, parse=parse)
    assert answer.size == "small"
    assert gateway.backing_off_s("small") == 0.0


async def test_rate_limited_honours_retry_after_and_doubles_without_it(
    make_gateway: Callable[..., LlmGateway], llm: LlmServer, clock: FakeClock
) -> None:
    gateway = make_gateway()
    await llm.control(mode="rate_limited", retry_after_s=7)
    with pytest.raises(LlmRateLimited):
        await gateway.complete(PROMPT, "large", deadline_ms=1000, parse=parse)
    assert gateway.backing_off_s("large") == pytest.approx(7.0)
    clock.tick(7.0)
    await llm.control(mode="rate_limited", retry_after_s=None)
    with pytest.raises(LlmRateLimited):
        await gateway.complete(PROMPT, "large", deadline_ms=1000, parse=parse)
    # The second 429 in a row without Retry-After: a 2 s step.
    assert 1.5 <= gateway.backing_off_s("large") <= 2.0


async def test_invalid_answer_is_retried_once(
    make_gateway: Callable[..., LlmGateway], llm: LlmServer, redis: Redis, clock: FakeClock
) -> None:
    """Seed 000 "Invalid Response": retry once; the retry's good answer is used."""
    gateway = make_gateway()
    await llm.control(invalid_times=1)
    answer = await gateway.complete(PROMPT, "small", deadline_ms=1000, parse=parse)
    assert "Aurora Headphones" in answer.value["headline"]
    assert answer.requests == 2
    assert gateway.counters.retries == 1
    assert (await llm.stats())["requests"] == 2
    # Both calls are paid for, the invalid one too.
    await gateway.cost.flush()  # written in the background
    spent = float(await redis.get(keys.llm_cost(utc_day(clock()))))
    assert spent == pytest.approx(answer.cost_usd)
    assert gateway.counters.cost_usd == pytest.approx(answer.cost_usd)
    assert answer.cost_usd > SMALL_PRICE * answer.completion.output_tokens / 1000


@pytest.mark.parametrize("control", [{"invalid_times": 2}, {"mode": "invalid_json"}])
async def test_invalid_twice_raises(
    make_gateway: Callable[..., LlmGateway], llm: LlmServer, control: dict[str, Any]
) -> None:
    gateway = make_gateway()
    await llm.control(**control)
    with pytest.raises(InvalidLlmResponse):
        await gateway.complete(PROMPT, "small", deadline_ms=1000, parse=parse)
    assert (await llm.stats())["requests"] == 2
    assert gateway.counters.calls["invalid"] == 1
    # An answer that does not parse still came from a healthy server.
    assert gateway.breaker_state("small") is State.CLOSED


async def test_an_answer_cut_at_max_tokens_is_retried_once_then_refused(
    make_gateway: Callable[..., LlmGateway], llm: LlmServer, redis: Redis, clock: FakeClock
) -> None:
    """The fake server's answers parse but say ``finish_reason: "length"``: the tier's own
    parser refuses them as invalid, so they earn the one retry and are paid for."""
    gateway = make_gateway()
    await llm.control(mode="length")
    with pytest.raises(InvalidLlmResponse, match="cut at max_tokens"):
        await gateway.complete(PROMPT, "small", deadline_ms=1000, parse=from_completion)
    assert (await llm.stats())["requests"] == 2
    assert gateway.counters.calls["invalid"] == 1
    assert gateway.counters.retries == 1
    assert gateway.breaker_state("small") is State.CLOSED
    await gateway.cost.flush()
    assert float(await redis.get(keys.llm_cost(utc_day(clock())))) > 0


async def test_budget_spent_refuses_without_a_request(
    make_gateway: Callable[..., LlmGateway], llm: LlmServer, redis: Redis, clock: FakeClock
) -> None:
    """Seed 000 "Cost Overrun": the day's budget spent -> template-only."""
    gateway = make_gateway(budget=1.0)
    await redis.set(keys.llm_cost(utc_day(clock())), "1.0")
    with pytest.raises(LlmBudgetExceeded):
        await gateway.complete(PROMPT, "small", deadline_ms=1000, parse=parse)
    assert (await llm.stats())["requests"] == 0
    assert gateway.counters.calls["budget"] == 1
    # A new UTC day, a new budget.
    clock.tick(86_400)
    answer = await gateway.complete(PROMPT, "small", deadline_ms=1000, parse=parse)
    assert answer.size == "small"


async def test_budget_is_shared_by_every_process(
    make_gateway: Callable[..., LlmGateway], llm: LlmServer
) -> None:
    first, second = make_gateway(budget=1e-6), make_gateway(budget=1e-6)
    await first.complete(PROMPT, "large", deadline_ms=1000, parse=parse)
    await first.cost.flush()
    assert await second.budget_left() < 0
    with pytest.raises(LlmBudgetExceeded):
        await second.complete(PROMPT, "large", deadline_ms=1000, parse=parse)
    assert (await llm.stats())["requests"] == 1


async def test_model_down_fails_over_to_the_other(
    make_gateway: Callable[..., LlmGateway], llm: LlmServer
) -> None:
    """Seed 000 "Model Unavailable": route to the backup model."""
    gateway = make_gateway(threshold=2)
    await llm.control(down_models=["large-model"])
    for _ in range(2):
        answer = await gateway.complete(PROMPT, "large", deadline_ms=1000, parse=parse)
        assert answer.size == "small"
        assert answer.completion.model == "small-model"
    assert (await llm.stats())["by_model"] == {"large-model": 2, "small-model": 2}
    # The large model's breaker is open now: straight to the small one.
    assert gateway.breaker_state("large") is State.OPEN
    answer = await gateway.complete(PROMPT, "large", deadline_ms=1000, parse=parse)
    assert answer.size == "small"
    assert (await llm.stats())["by_model"] == {"large-model": 2, "small-model": 3}
    assert gateway.counters.failovers == 3


async def test_dead_server_fails_over_to_the_other(
    make_gateway: Callable[..., LlmGateway], llm: LlmServer
) -> None:
    gateway = make_gateway(large_url=f"http://127.0.0.1:{free_port()}/v1")
    answer = await gateway.complete(PROMPT, "large", deadline_ms=1000, parse=parse)
    assert answer.size == "small"
    assert (await llm.stats())["by_model"] == {"small-model": 1}


async def test_both_down_is_unavailable(
    make_gateway: Callable[..., LlmGateway], llm: LlmServer
) -> None:
    gateway = make_gateway()
    await llm.control(mode="down")
    with pytest.raises(LlmUnavailable) as failed:
        await gateway.complete(PROMPT, "small", deadline_ms=1000, parse=parse)
    assert failed.value.status == 503
    assert (await llm.stats())["by_status"] == {"503": 2}
    assert gateway.counters.calls["unavailable"] == 1


async def test_rate_limiter_refuses_beyond_the_rate(
    make_gateway: Callable[..., LlmGateway], llm: LlmServer, clock: FakeClock
) -> None:
    gateway = make_gateway(rate=2.0)
    for _ in range(2):
        await gateway.complete(PROMPT, "small", deadline_ms=1000, parse=parse)
    assert gateway.would_limit()
    with pytest.raises(LlmRateLimited) as refused:
        await gateway.complete(PROMPT, "small", deadline_ms=1000, parse=parse)
    assert refused.value.retry_after_s == pytest.approx(0.5, abs=1e-3)
    assert (await llm.stats())["requests"] == 2
    clock.tick(0.5)
    await gateway.complete(PROMPT, "small", deadline_ms=1000, parse=parse)
    assert (await llm.stats())["requests"] == 3
