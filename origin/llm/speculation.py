"""Speculative execution of the LLM tier for a personalize request (start the LLM
call while ranking proceeds, so that its latency hides behind the ranking's).

As soon as retrieval has its candidates, the tier is started for the likeliest top item
(the best base score) in a task of its own: while the request waits for the posteriors
and ranks, the task evaluates the triggers, looks in the caches and has the model's request
on the wire. When the ranking is done and its top item is the one speculated on, the answer
is awaited within the tier's own deadline (the task never raises: the tier ends every
failure in a template) and its headline becomes the top item's explanation; otherwise the
task is cancelled and the template stands. Only personal answers are speculated on (a
segment fill is shared; its explanations come from ``/v1/explain``'s segment cache), and
only when explanations were asked for.

The speculation starts before the posteriors are read, so the bandit's uncertainty is not
known yet: the triggers that can fire here are cold start, consideration pages and cross
domain (an explanation asked for with a ranking is not "requested": edges ask for them with
every fill, and the model must stay under the LLM tier's 10 % of requests).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace

from origin.catalog.item_index import ItemIndex
from origin.llm.model import TierOutcome
from origin.llm.summaries import (
    evidence_for,
    item_summary,
    recommendation_summary,
    user_summary,
)
from origin.llm.tier import ExplainInput, LlmTier, TierCounters
from origin.ranking.emotion import EmotionalState
from origin.ranking.history import RankingHistory
from origin.ranking.pipeline import SOURCE_NAME
from origin.ranking.retrieval import Candidates, Source
from protocol.api import PageType


class Speculation:
    def __init__(self, row: int, task: asyncio.Task[TierOutcome], counters: TierCounters) -> None:
        self.row = row
        self._task = task
        self._counters = counters

    @classmethod
    def start(
        cls,
        tier: LlmTier,
        index: ItemIndex,
        candidates: Candidates,
        *,
        now_ms: int,
        state: RankingHistory,
        preferences: Mapping[str, float],
        emotion: EmotionalState,
        page_type: PageType | None,
        budget_ms: float,
    ) -> Speculation | None:
        """The task for the likeliest top item, or None when there is nothing to explain
        or no model to ask."""
        if not tier.enabled or len(candidates) == 0:
            return None
        # Retrieval's first candidate: the one nearest the user's taste (or the session).
        best = 0
        row = int(candidates.rows[best])
        # The source is retrieval's own for the candidate (a cold user's trending pick is
        # "simple" and stays a template, as trigger evaluation says).
        evidence = replace(
            evidence_for(state, index, row),
            source=SOURCE_NAME[Source(int(candidates.source[best]))],
        )
        segment = state.segment(now_ms)
        explain_input = ExplainInput(
            user=user_summary(
                state, index, row, segment=segment.value, preferences=preferences, emotion=emotion
            ),
            item=item_summary(index, row),
            rec=recommendation_summary(index, row, evidence, personal=True),
            style="concise",
            personal=True,
            explanation_requested=False,
            page_type=page_type.value if page_type else None,
        )
        counters = tier.counters
        counters.speculated += 1
        task = asyncio.create_task(tier.explain(explain_input, budget_ms=budget_ms))
        return cls(row, task, counters)

    async def headline_for(self, top_row: int) -> str | None:
        """The model's headline when ``top_row`` is the item speculated on; else None (and
        the speculation is abandoned)."""
        if top_row != self.row:
            self._task.cancel()
            self._counters.speculation_missed += 1
            return None
        outcome = await self._task
        if not outcome.explanation.llm_generated:
            self._counters.speculation_templates += 1
            return None
        self._counters.speculation_used += 1
        return outcome.explanation.headline

    def cancel(self) -> None:
        self._task.cancel()
