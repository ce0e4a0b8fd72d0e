"""The gateway's cost and routing rules (the cost tracker, the model router and
tiered models: a 7B model for simple explanations, a 70B one for complex reasoning).

Routing, first rule that applies:

1. a segment-wide explanation (cached per segment): small. Its context is four short,
   generic facts, nothing to reason across, and one answer serves many users;
2. cold start or cross-domain: large. Few signals to go on, or preferences to carry from
   one domain to another: that is the "complex reasoning" the large model is for;
3. conversational style: large. Friendly prose built on the user's own context reads
   noticeably better from the larger model, and the style is asked for explicitly;
4. anything else (concise or detailed, one item, the user asked, a consideration page, an
   uncertain pick): small.
"""

from __future__ import annotations

from origin.llm.model import ModelSize, Style

LARGE_REASONS = frozenset({"cold_start", "cross_domain"})
LARGE_STYLES: frozenset[Style] = frozenset({"conversational"})


def cost_usd(input_tokens: int, output_tokens: int, usd_per_1k: float) -> float:
    """Price of one call at one price per 1,000 tokens, input and output alike."""
    return (input_tokens + output_tokens) * usd_per_1k / 1000


def route(reason: str, style: Style, *, shared: bool = False) -> ModelSize:
    """Which model answers: ``reason`` is the trigger's (``Decision.reason``)."""
    if shared:
        return "small"
    if reason in LARGE_REASONS or style in LARGE_STYLES:
        return "large"
    return "small"
