"""The whole LLM path for one explanation: trigger evaluation, the response
cache, context assembly, the prompt and its cache, the gateway, parsing, and the templates
whenever the model is skipped, slow, failing or over budget. Never raises because of the
model: every way it can fail ends in a template explanation, with the reason counted.

Scope. A *segment* explanation (``personal=False``: new and casual users, whose history is
too thin to say anything personal, and every fill an edge shares) is built from the segment
context alone (``context.segment_context``: segment, category, source, trend) and cached per
(segment, category, source, style) for an hour, as response caching prescribes; edges may cache it
too. A *personal* explanation uses the user's own context and is cached only by its exact
prompt, which only this user's next identical request can match.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import RedisError

from config.settings import Settings
from origin.exceptions import InvalidLlmResponse, LlmError
from origin.llm import fallback, response, triggers
from origin.llm.caches import PromptCache, ResponseCache
from origin.llm.client import LlmClient
from origin.llm.context import assemble, segment_context
from origin.llm.gateway import LlmGateway
from origin.llm.model import (
    Explanation,
    ItemSummary,
    ModelSize,
    Prompt,
    RecommendationSummary,
    Style,
    TierOutcome,
    TriggerInput,
    UserSummary,
)
from origin.llm.pricing import route
from origin.llm.prompt import build
from redis_client.client import RedisClient

log = logging.getLogger(__name__)

# Time kept back from a request's budget for what follows the model's answer (caching it,
# rendering the response).
MARGIN_MS = 5.0
# Skips that mean "the model was wanted but could not be asked": they count as fallbacks.
WANTED_BUT_SKIPPED = frozenset({"budget", "rate_limited"})


@dataclass(frozen=True, slots=True)
class ExplainInput:
    user: UserSummary
    item: ItemSummary
    rec: RecommendationSummary
    style: Style
    personal: bool
    explanation_requested: bool
    page_type: str | None = None
    cross_domain: bool = False
    uncertainty: float = 0.0


@dataclass
class TierCounters:
    """Plain numbers for ``/metrics``, read at scrape time."""

    explanations: int = 0
    llm_answers: int = 0  # from the model or one of its caches
    decisions: Counter[str] = field(default_factory=Counter)  # trigger reasons
    fallbacks: Counter[str] = field(default_factory=Counter)  # why the model was wanted, not used
    # Speculative execution for personalize (origin.llm.speculation): started, the ranking's
    # top item was the one speculated on and the model answered, it was another item
    # (cancelled), the right item but a template.
    speculated: int = 0
    speculation_used: int = 0
    speculation_missed: int = 0
    speculation_templates: int = 0
    precomputed: int = 0  # segment explanations written ahead of time (origin.llm.precompute)

    @property
    def wanted(self) -> int:
        return self.llm_answers + sum(self.fallbacks.values())


class LlmTier:
    def __init__(
        self,
        gateway: LlmGateway | None,
        prompts: PromptCache,
        responses: ResponseCache,
        *,
        timeout_ms: float,
        perf: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.gateway = gateway
        self.prompts = prompts
        self.responses = responses
        self.counters = TierCounters()
        self._timeout_ms = timeout_ms
        self._perf = perf
        self._writes: set[asyncio.Task[None]] = set()

    @property
    def enabled(self) -> bool:
        return self.gateway is not None

    async def explain(self, x: ExplainInput, *, budget_ms: float) -> TierOutcome:
        """The explanation of ``x.item`` within ``budget_ms`` (the request's time left)."""
        started = self._perf()
        self.counters.explanations += 1
        template = fallback.explain(x.item, x.rec.signals, x.style, personal=x.personal)
        gateway = self.gateway
        if gateway is None:
            return TierOutcome(template, invoked=False)
        cached = await self._cached(x) if not x.personal else None
        decision = triggers.evaluate(
            TriggerInput(
                explanation_requested=x.explanation_requested,
                interaction_count=x.user.interaction_count,
                bandit_uncertainty=x.uncertainty,
                page_type=x.page_type,
                cross_domain=x.cross_domain,
                budget_remaining_ms=budget_ms - self._elapsed_ms(started),
                rate_limited=gateway.would_limit(),
                cache_hit=cached is not None,
                simple_recommendation=triggers.is_simple(x.rec.source),
            )
        )
        self.counters.decisions[decision.reason] += 1
        if cached is not None:
            self.counters.llm_answers += 1
            return TierOutcome(cached, invoked=True, cache="response")
        if not decision.invoke:
            if decision.reason in WANTED_BUT_SKIPPED:
                return self._fallback(template, decision.reason)
            return TierOutcome(template, invoked=False)
        shared = not x.personal
        context = (
            segment_context(x.user, x.item, x.rec) if shared else assemble(x.user, x.item, x.rec)
        )
        size = route(decision.reason, x.style, shared=shared)
        # A server held to the grammar needs no format example (a small model copies it).
        prompt = build(
            context, x.item, x.style, constrained=gateway.endpoint(size).constraint == "gbnf"
        )
        explanation = await self._from_prompt_cache(prompt, size, gateway)
        if explanation is not None:
            self.counters.llm_answers += 1
            await self._keep(x, explanation)
            return TierOutcome(explanation, invoked=True, cache="prompt")
        deadline_ms = min(self._timeout_ms, budget_ms - self._elapsed_ms(started) - MARGIN_MS)
        if deadline_ms <= 0:
            return self._fallback(template, "budget")
        try:
            answer = await gateway.complete(
                prompt, size, deadline_ms=deadline_ms, parse=response.from_completion
            )
        except (LlmError, InvalidLlmResponse) as exc:
            log.info("LLM explanation failed (%s): %s", type(exc).__name__, exc)
            return self._fallback(template, _reason(exc))
        self.counters.llm_answers += 1
        # The caches are written after the answer has left (a failed write is a later miss).
        self._later(self.prompts.put(prompt, size, answer.completion.content))
        self._later(self._keep(x, answer.value))
        return TierOutcome(answer.value, invoked=True, cost_usd=answer.cost_usd)

    def _later(self, write: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(write)
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def flush(self) -> None:
        """Waits for the cache writes still under way (tests, shutdown)."""
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)

    async def _cached(self, x: ExplainInput) -> Explanation | None:
        try:
            return await self.responses.get(x.user.segment, x.item.category, x.rec.source, x.style)
        except RedisError as exc:
            log.warning("response cache read failed: %r", exc)
            return None

    async def _from_prompt_cache(
        self, prompt: Prompt, size: ModelSize, gateway: LlmGateway
    ) -> Explanation | None:
        try:
            content = await self.prompts.get(prompt, size)
        except RedisError as exc:
            log.warning("prompt cache read failed: %r", exc)
            return None
        if content is None:
            return None
        try:
            return response.parse(content, model=gateway.endpoint(size).model)
        except InvalidLlmResponse:
            return None

    async def _keep(self, x: ExplainInput, explanation: Explanation) -> None:
        """A segment explanation goes to the response cache for the segment."""
        if x.personal:
            return
        try:
            await self.responses.put(
                x.user.segment, x.item.category, x.rec.source, x.style, explanation
            )
        except RedisError as exc:
            log.warning("response cache write failed: %r", exc)

    def _fallback(self, template: Explanation, reason: str) -> TierOutcome:
        self.counters.fallbacks[reason] += 1
        return TierOutcome(template, invoked=False, fallback_reason=reason)

    def _elapsed_ms(self, started: float) -> float:
        return (self._perf() - started) * 1000


@asynccontextmanager
async def llm_tier(settings: Settings, redis: RedisClient) -> AsyncIterator[LlmTier]:
    """The tier ``settings`` describe: with a model server when ``LLM_BASE_URL`` is set,
    templates only otherwise; its HTTP connections closed on the way out."""
    prompts = PromptCache(redis, settings.llm_cache_ttl_s)
    responses = ResponseCache(redis, settings.llm_cache_ttl_s)
    client = LlmClient() if settings.llm_base_url else None
    gateway = LlmGateway.from_settings(settings, redis, client) if client else None
    tier = LlmTier(gateway, prompts, responses, timeout_ms=settings.llm_timeout_ms)
    try:
        yield tier
    finally:
        await tier.flush()
        if gateway is not None:
            await gateway.cost.flush()
        if client is not None:
            await client.aclose()


def _reason(exc: Exception) -> str:
    """``LlmTimeout`` -> ``timeout``, ``LlmRateLimited`` -> ``rate_limited`` ..."""
    name = type(exc).__name__.removeprefix("Llm")
    if name == "InvalidLlmResponse":
        return "invalid_response"
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")
