"""Whether to invoke the model for one explanation (trigger evaluation).

The skip rules come first, in the seed's order: a call that cannot fit the latency budget,
is over the rate limit, is already cached or would say what a template says is never made,
however much an invoke rule wants it. Then the invoke rules, in the seed's order; the first
rule that decides names the reason (for metrics and logs).

Our page types (``protocol.api.PageType``) have no "consideration" page: the seed's
"high-value decision" is the item detail page, where a user weighs one item before buying,
so ``CONSIDERATION_PAGES`` holds ``item_detail`` (and the seed's own word, for callers that
pass it through).
"""

from __future__ import annotations

import math

from origin.llm.model import Decision, TriggerInput
from protocol.api import PageType

MIN_BUDGET_MS = 100.0  # latency_budget_remaining < 100 ms: no time for a model call
COLD_START_INTERACTIONS = 10  # interaction_count < 10: cold start
UNCERTAINTY_THRESHOLD = 0.4  # bandit.uncertainty > 0.4: low confidence
CONSIDERATION_PAGES = frozenset({PageType.ITEM_DETAIL.value, "consideration"})
# Sources whose reason a template states as well as a model would.
SIMPLE_SOURCES = frozenset({"trending"})


def evaluate(t: TriggerInput) -> Decision:
    """The first rule that decides, skip rules before invoke rules."""
    if t.budget_remaining_ms < MIN_BUDGET_MS:
        return Decision(False, "budget")
    if t.rate_limited:
        return Decision(False, "rate_limited")
    if t.cache_hit:
        return Decision(False, "cached")
    if t.simple_recommendation:
        return Decision(False, "simple")
    if t.explanation_requested:
        return Decision(True, "requested")
    if t.interaction_count < COLD_START_INTERACTIONS:
        return Decision(True, "cold_start")
    if t.bandit_uncertainty > UNCERTAINTY_THRESHOLD:
        return Decision(True, "uncertain")
    if t.page_type in CONSIDERATION_PAGES:
        return Decision(True, "consideration")
    if t.cross_domain:
        return Decision(True, "cross_domain")
    return Decision(False, "not_needed")


def bandit_uncertainty(alpha: float, beta: float) -> float:
    """The bandit uncertainty ``sqrt(alpha + beta)^-1`` of a Beta posterior, in [0, 1].

    Evidence below one pseudo-observation (alpha + beta <= 1, or nothing usable) counts
    as fully uncertain rather than dividing by zero.
    """
    total = alpha + beta
    if math.isnan(total) or total <= 1.0:
        return 1.0
    return 1.0 / math.sqrt(total)  # in (0, 1) for total > 1; 0.0 for +inf


def is_simple(source: str) -> bool:
    """A recommendation a template explains as well as a model (trending)."""
    return source in SIMPLE_SOURCES
