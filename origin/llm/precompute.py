"""Pre-computed explanations, generated for top items in advance, off the LLM latency
budget: one origin, elected, asks the model ahead of time for the segment explanations
that new and casual users' requests will look for, so that those find them in the response
cache instead of waiting for the model.

What is warmed: for the shared segments (new, casual), the categories of the most popular
items, and the sources their personal answers come from (collaborative, content; trending
picks are "simple" and stay templates), in the concise style: at most
``len(SHARED) * TOP_CATEGORIES * len(SOURCES)`` model calls per round, each skipped when the
cache already has it. A round runs every ``PERSO_LLM_PRECOMPUTE_EVERY_S`` (by default half the
cache's TTL, so entries are refreshed before they lapse), only on the elected origin
(``coordination.leader``, resource ``llm-precompute``), and stops as soon as the gateway
would refuse a call (rate limit, budget): requests come first.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from coordination.leader import LeaderElection
from coordination.lock import Lease, Lock
from origin.catalog.item_index import ItemIndex
from origin.llm.model import RecommendationSummary, UserSummary
from origin.llm.summaries import item_summary
from origin.llm.tier import ExplainInput, LlmTier
from protocol.segments import Segment

log = logging.getLogger(__name__)

RESOURCE = "llm-precompute"
SHARED = (Segment.NEW, Segment.CASUAL)
SOURCES = ("collaborative", "content")
TOP_CATEGORIES = 10
LEASE_TTL_MS = 30_000


def warm_plan(index: ItemIndex) -> list[ExplainInput]:
    """The explanations a round makes sure of: one per (segment, category, source)."""
    seen: dict[str, int] = {}
    for row in index.trending_order:
        category = index.items[int(row)].category
        if category not in seen:
            seen[category] = int(row)
            if len(seen) == TOP_CATEGORIES:
                break
    plan = []
    for segment in SHARED:
        for row in seen.values():
            for source in SOURCES:
                plan.append(
                    ExplainInput(
                        user=UserSummary(segment=segment.value, interaction_count=0),
                        item=item_summary(index, row),
                        rec=RecommendationSummary(source=source, confidence=0.6),
                        style="concise",
                        personal=False,
                        explanation_requested=True,
                    )
                )
    return plan


async def warm_once(tier: LlmTier, index: ItemIndex, *, timeout_ms: float) -> int:
    """One round; returns the explanations the model wrote."""
    written = 0
    budget_ms = timeout_ms * 2
    for item in warm_plan(index):
        gateway = tier.gateway
        if gateway is None or gateway.would_limit():
            break
        cached = await tier.responses.get(
            item.user.segment, item.item.category, item.rec.source, item.style
        )
        if cached is not None:
            continue
        outcome = await tier.explain(item, budget_ms=budget_ms)
        await tier.flush()  # in the cache before the next look
        if outcome.explanation.llm_generated:
            written += 1
        elif outcome.fallback_reason is not None:
            break  # the model is failing or over budget: leave it to the requests
    tier.counters.precomputed += written
    return written


async def run(
    tier: LlmTier,
    index: Callable[[], ItemIndex],
    lock: Lock,
    stop: asyncio.Event,
    *,
    every_s: float,
    timeout_ms: float,
) -> None:
    """Campaign for the precompute job and, while elected, warm every ``every_s`` from the
    catalog ``index()`` serves then (a rebuild may have swapped it)."""
    election = LeaderElection(lock, RESOURCE, LEASE_TTL_MS, renew_every_s=10.0)

    async def job(_: Lease) -> None:
        written = await warm_once(tier, index(), timeout_ms=timeout_ms)
        if written:
            log.info("pre-computed %d segment explanations", written)

    await election.run(job, stop, every_s=every_s)
