"""Context assembly (retrieval-augmented): what the model is told about one
user, one item and why it was recommended, within the token budget.

Only the requesting user's data can get in, by construction: the one ``UserSummary``
argument is the only user data the functions see. ``segment_context`` goes further for
explanations cached per segment (response caching: key = segment, category,
source): from the user only the segment name, from the item only its category, so the
cached answer never names one user's history nor one item.

Over budget, sections give way from the least important up (``TRIM_ORDER``): the runners-up
first, then the category trend, the mood, similar items viewed, recent activity (oldest
first), stated preferences. The item's details and the recommendation's source and
confidence are what is being explained: they are always kept.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from origin.catalog.item_index import NEW_ARRIVAL_FRESHNESS
from origin.llm.model import ItemSummary, RecommendationSummary, UserSummary

INPUT_TOKEN_BUDGET = 2000  # the token budget: 2,000 tokens input
OUTPUT_TOKEN_BUDGET = 500  # the token budget: 500 tokens output
# One entry (a title, an activity) at most; it keeps the always-kept sections small.
MAX_ENTRY_CHARS = 160
MAX_ENTRIES = 10  # per list section, before any budget trimming

PREFERENCES = "User preferences"
RECENT_ACTIVITY = "Recent activity"
EMOTIONAL_STATE = "Emotional state"
ITEM_DETAILS = "Item details"
SIMILAR_VIEWED = "Similar items viewed"
CATEGORY_TRENDS = "Category trends"
SOURCE = "Recommendation source"
CONFIDENCE = "Recommendation confidence"
ALTERNATIVES = "Alternative items"
SEGMENT = "User segment"
CATEGORY = "Item category"

# Least important first; a section's entries go from its end (lists are newest or closest
# first, so recent activity loses its oldest entries first).
TRIM_ORDER = (
    ALTERNATIVES,
    CATEGORY_TRENDS,
    EMOTIONAL_STATE,
    SIMILAR_VIEWED,
    RECENT_ACTIVITY,
    PREFERENCES,
)

_SOURCES = {
    "collaborative": "collaborative filtering (users with similar tastes)",
    "content": "content match (similar to what the user viewed)",
    "trending": "trending (popular right now)",
    "exploration": "exploration (something new to try)",
    "fresh": "new arrival",
}
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Section:
    """One context line: a name and its entries, joined by ``SEPARATOR``."""

    name: str
    entries: tuple[str, ...]

    SEPARATOR = "; "

    @property
    def text(self) -> str:
        return self.SEPARATOR.join(self.entries)


@dataclass(frozen=True, slots=True)
class PromptContext:
    """The ordered sections; ``shared`` when built for a whole segment (no user data)."""

    sections: tuple[Section, ...]
    shared: bool = False

    def lines(self) -> list[tuple[str, str]]:
        return [(s.name, s.text) for s in self.sections]


def estimate_tokens(text: str) -> int:
    """ceil(characters / 4): the usual rough count for English under BPE tokenizers.

    Deliberately no tokenizer: the model behind ``LLM_BASE_URL`` is unknown, and the
    budget only needs to be conservative, not exact.
    """
    return math.ceil(len(text) / 4)


def render(context: PromptContext) -> str:
    """The context as the prompt's bullet lines (``- name: text``)."""
    return "\n".join(f"- {name}: {text}" for name, text in context.lines())


def assemble(
    user: UserSummary,
    item: ItemSummary,
    rec: RecommendationSummary,
    *,
    budget_tokens: int = INPUT_TOKEN_BUDGET,
) -> PromptContext:
    """Everything context assembly lists, in its order, trimmed to ``budget_tokens``."""
    preferences = user.preferences or (
        f"none stated yet ({user.interaction_count} interactions so far)",
    )
    sections = (
        _section(PREFERENCES, preferences),
        _section(RECENT_ACTIVITY, user.recent_activity),
        _section(EMOTIONAL_STATE, (user.emotional_state,)),
        _section(ITEM_DETAILS, item_details(item)),
        _section(SIMILAR_VIEWED, user.similar_viewed),
        _section(CATEGORY_TRENDS, (rec.category_trend,)),
        _section(SOURCE, source_description(rec)),
        _section(CONFIDENCE, (f"{rec.confidence:.2f}",)),
        _section(ALTERNATIVES, rec.alternatives),
    )
    return fit(PromptContext(tuple(s for s in sections if s.entries)), budget_tokens)


def segment_context(
    user: UserSummary,
    item: ItemSummary,
    rec: RecommendationSummary,
    *,
    budget_tokens: int = INPUT_TOKEN_BUDGET,
) -> PromptContext:
    """The segment name, the item's category, the source and the category trend only."""
    sections = (
        _section(SEGMENT, (user.segment,)),
        _section(CATEGORY, (item.category_name,)),
        # The bare source: its personal gloss ("similar to what the user viewed") would
        # invite the model to speak of one user's history.
        _section(SOURCE, (_SOURCES.get(rec.source, rec.source).split(" (")[0],)),
        _section(CATEGORY_TRENDS, (rec.category_trend,)),
    )
    return fit(PromptContext(tuple(s for s in sections if s.entries), shared=True), budget_tokens)


def fit(context: PromptContext, budget_tokens: int) -> PromptContext:
    """Drop entries in ``TRIM_ORDER`` until ``render(context)`` fits ``budget_tokens``.

    Sections outside ``TRIM_ORDER`` are kept even when they alone overflow the budget;
    ``MAX_ENTRY_CHARS`` bounds them.
    """
    sections = list(context.sections)
    for name in TRIM_ORDER:
        while estimate_tokens(render(replace(context, sections=tuple(sections)))) > budget_tokens:
            at = next((i for i, s in enumerate(sections) if s.name == name), None)
            if at is None:
                break
            entries = sections[at].entries[:-1]
            if entries:
                sections[at] = Section(name, entries)
            else:
                del sections[at]
    return replace(context, sections=tuple(sections))


def item_details(item: ItemSummary) -> tuple[str, ...]:
    details = [
        item.title,
        f"{item.category_name} by {item.brand}" if item.brand else item.category_name,
        f"${item.price:,.2f}",
        f"popularity {item.popularity:.2f}",
    ]
    if item.freshness >= NEW_ARRIVAL_FRESHNESS:
        details.append("new arrival")
    return tuple(details)


def source_description(rec: RecommendationSummary) -> tuple[str, ...]:
    described = _SOURCES.get(rec.source, rec.source)
    if rec.signals:
        return (described, "signals: " + ", ".join(rec.signals))
    return (described,)


def clean(text: str) -> str:
    """One line, at most ``MAX_ENTRY_CHARS``: a title with a newline in it cannot start a
    line of its own in the prompt (say, a fake instruction)."""
    flat = _SPACE.sub(" ", text).strip()
    if len(flat) > MAX_ENTRY_CHARS:
        return flat[: MAX_ENTRY_CHARS - 1].rstrip() + "…"
    return flat


def _section(name: str, entries: tuple[str, ...]) -> Section:
    cleaned = tuple(e for e in (clean(x) for x in entries[:MAX_ENTRIES]) if e)
    return Section(name, cleaned)
