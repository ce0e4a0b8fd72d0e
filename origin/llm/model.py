"""The LLM tier's data: what the trigger evaluator, context assembler, prompt builder,
gateway, caches and fallback pass between them. Plain frozen dataclasses, no behaviour."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Style = Literal["concise", "detailed", "conversational"]
STYLES: tuple[Style, ...] = ("concise", "detailed", "conversational")
# Which model the router picks: a small one for simple explanations, a large one for
# complex reasoning (tiered models: 7B, 50 ms; 70B, 150 ms).
ModelSize = Literal["small", "large"]


@dataclass(frozen=True, slots=True)
class Factor:
    """One reason, weighted in [0, 1] (the prompt template's JSON ``factors``)."""

    name: str
    weight: float
    description: str


@dataclass(frozen=True, slots=True)
class Explanation:
    """An explanation of one recommended item, from the model or from templates."""

    headline: str
    detailed: str
    factors: tuple[Factor, ...]
    llm_generated: bool
    model: str | None = None  # the model that wrote it; None for templates


@dataclass(frozen=True, slots=True)
class TriggerInput:
    """What trigger evaluation looks at."""

    explanation_requested: bool
    interaction_count: int
    bandit_uncertainty: float  # 0..1; > 0.4 is low confidence
    page_type: str | None
    cross_domain: bool
    budget_remaining_ms: float
    rate_limited: bool
    cache_hit: bool
    simple_recommendation: bool  # e.g. trending: a template says it as well


@dataclass(frozen=True, slots=True)
class Decision:
    invoke: bool
    reason: str  # why (the first rule that decided), for metrics and logs


@dataclass(frozen=True, slots=True)
class UserSummary:
    """The user's side of the context: nothing from any other user."""

    segment: str
    interaction_count: int
    preferences: tuple[str, ...] = ()  # "likes Electronics", "price-conscious"
    recent_activity: tuple[str, ...] = ()  # "viewed Aurora Headphones", newest first
    emotional_state: str = ""  # "high engagement, decision mode"
    similar_viewed: tuple[str, ...] = ()  # titles of viewed items near the explained one


@dataclass(frozen=True, slots=True)
class ItemSummary:
    item_id: str
    title: str
    category: str
    category_name: str
    brand: str
    price: float
    popularity: float
    freshness: float


@dataclass(frozen=True, slots=True)
class RecommendationSummary:
    """Why the ranking chose the item: its source and confidence, what else was close."""

    source: str  # collaborative | content | trending | exploration | fresh
    confidence: float  # 0..1
    alternatives: tuple[str, ...] = ()  # titles of the runners-up
    signals: tuple[str, ...] = ()  # the rule-based signals (origin.ranking.explanations)
    category_trend: str = ""  # "Electronics: 3 of the 10 most popular items"


@dataclass(frozen=True, slots=True)
class Prompt:
    """Chat messages for an OpenAI-compatible ``/chat/completions``, and their budget."""

    system: str
    user: str
    max_output_tokens: int
    input_tokens: int  # estimated
    # The answer's shape as a GBNF grammar, sent to servers that take one
    # (``PERSO_LLM_OUTPUT_CONSTRAINT=gbnf``); None: JSON mode only.
    grammar: str | None = None


@dataclass(frozen=True, slots=True)
class Completion:
    """A model server's answer: the message text, the tokens it counted, the model."""

    content: str
    model: str
    input_tokens: int
    output_tokens: int
    elapsed_ms: float
    # Why the model stopped: "stop" (done), "length" (cut at max_tokens: not an answer),
    # None when the server did not say.
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class TierOutcome:
    """What the tier did for one explanation, for metrics and the response metadata."""

    explanation: Explanation
    invoked: bool  # the model was called (or its answer came from a cache)
    cache: Literal["response", "prompt", "none"] = "none"
    fallback_reason: str | None = None  # why templates answered, when the model was wanted
    cost_usd: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)
