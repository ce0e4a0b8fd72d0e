"""The prompt template: its system line, the question, the context's
bullet lines and the JSON format asked for, plus one line for the explanation style.

The seed's ``System:`` and ``User:`` are the two chat messages. Building is deterministic
(same inputs, same text: the prompt cache keys on it) and keeps the estimated input within
the budget by trimming the context (``origin.llm.context.fit``).

When the server is held to the answer's shape by a grammar (``constrained``:
``origin.llm.grammar``), the JSON example gives way to ``CONSTRAINED_FORMAT``, which says
what goes in each field: measured with the small local model, the example is what it wrote
back ("One sentence explanation") rather than an answer.

A segment-wide context (``PromptContext.shared``) asks about the item's category, not the item:
its answer is cached per segment, category and source, and served for other items.
"""

from __future__ import annotations

from origin.llm.context import (
    INPUT_TOKEN_BUDGET,
    OUTPUT_TOKEN_BUDGET,
    PromptContext,
    clean,
    estimate_tokens,
    fit,
    render,
)
from origin.llm.grammar import EXPLANATION_GRAMMAR
from origin.llm.model import ItemSummary, Prompt, Style

SYSTEM = (
    "You are a personalization assistant. Explain recommendations\n"
    "concisely and helpfully. Be specific to the user's context."
)
JSON_FORMAT = """Respond in this JSON format:
{
  "headline": "One sentence explanation",
  "detailed": "2-3 sentence detailed explanation",
  "factors": [
    {"name": "factor_name", "weight": 0.0-1.0, "description": "..."}
  ]
}"""
CONSTRAINED_FORMAT = (
    'Answer in JSON. In "headline", one sentence saying why this user would like it. '
    'In "detailed", two sentences using the context. In "factors", the reasons, each with '
    "a weight between 0 and 1."
)
STYLE_LINES: dict[Style, str] = {
    "concise": (
        "Style: concise. The headline is what the user sees: one short sentence. "
        'Keep "detailed" to one short sentence.'
    ),
    "detailed": (
        'Style: detailed. A specific headline, then 2-3 sentences in "detailed" '
        "naming the evidence from the context."
    ),
    "conversational": (
        'Style: conversational. Friendly, speaking to the user as "you", '
        'in the headline and in 2-3 sentences in "detailed".'
    ),
}
SHARED_LINE = (
    "This explanation is shared by many users of the segment: do not mention any one "
    "user's history or any single item."
)


def question(item: ItemSummary, *, shared: bool) -> str:
    if shared:
        return f'Explain why "{clean(item.category_name)}" items are recommended for this segment.'
    return f'Explain why "{clean(item.title)}" is recommended for this user.'


def build(
    context: PromptContext,
    item: ItemSummary,
    style: Style,
    *,
    budget: int = INPUT_TOKEN_BUDGET,
    constrained: bool = False,
) -> Prompt:
    """The two messages; ``input_tokens`` (estimated) stays within ``budget`` unless the
    context's always-kept sections alone overflow it. ``constrained``: the server writes
    the answer under ``grammar``, so the format is said, not shown."""
    head = question(item, shared=context.shared) + "\n\nContext:\n"
    answer_format = CONSTRAINED_FORMAT if constrained else JSON_FORMAT
    tail = "\n\n" + answer_format + "\n\n" + STYLE_LINES[style]
    if context.shared:
        tail += "\n" + SHARED_LINE
    # ceil(a/4) + ceil(b/4) >= ceil((a+b)/4): the parts' estimates bound the whole's.
    overhead = estimate_tokens(SYSTEM) + estimate_tokens(head + tail)
    fitted = fit(context, budget - overhead)
    user = head + render(fitted) + tail
    return Prompt(
        system=SYSTEM,
        user=user,
        max_output_tokens=OUTPUT_TOKEN_BUDGET,
        input_tokens=estimate_tokens(SYSTEM) + estimate_tokens(user),
        grammar=EXPLANATION_GRAMMAR,
    )
