"""Explanations without the model (fallback generation): a template headline and
rule-based factors from the signals of ``origin.ranking.explanations``, ``llm_generated=False``.

The headline follows the strongest signal, in ``origin.ranking.explanations.primary_reason``'s
order; for ``category_match`` it is the seed's template, "Recommended because you've shown
interest in {category}". A segment-wide answer (``personal=False``) drops the personal
signals, as ``signals_of`` does: it is shared by many users, so it never speaks of one
user's history, nor names the item.

Weights: each signal has an importance (``WORDING``: what the user did with this very
item or its like counts most, popularity least); a factor's weight is its share of the
total in whole hundredths (largest remainders), so the weights sum to 1 and follow the
importance order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from origin.llm.model import Explanation, Factor, ItemSummary, Style

PERSONAL_SIGNALS = frozenset(
    {"viewed_similar", "category_match", "previously_engaged", "price_match"}
)
DEFAULT_SIGNAL = "trending"  # what is left when no signal applies (as in signals_of)
MAX_DETAILED_SENTENCES = 3


@dataclass(frozen=True, slots=True)
class _Wording:
    importance: int
    reason: str  # a factor's description and a headline: "{category}" is filled in
    clause: str  # the same, after "because" (conversational)
    shared_reason: str = ""  # for segment-wide answers, when it differs
    shared_clause: str = ""


WORDING: dict[str, _Wording] = {
    "previously_engaged": _Wording(
        5, "You showed interest in this recently", "you showed interest in it recently"
    ),
    "viewed_similar": _Wording(
        4, "Similar to items you've viewed", "it's similar to items you've viewed"
    ),
    "category_match": _Wording(
        4, "Matches your interest in {category}", "it matches your interest in {category}"
    ),
    "price_match": _Wording(
        3, "Within your typical price range", "it's within your usual price range"
    ),
    "exploration": _Wording(
        2,
        "Something new for you to discover in {category}",
        "it's something new to discover in {category}",
    ),
    "new_arrival": _Wording(2, "New in {category}", "it's new in {category}"),
    "trending": _Wording(
        2,
        "Popular among users like you",
        "it's popular with people like you",
        shared_reason="Popular in {category} right now",
        shared_clause="it's popular in {category} right now",
    ),
}
# Which signal leads the headline (origin.ranking.explanations.primary_reason's order).
HEADLINE_ORDER = (
    "previously_engaged",
    "viewed_similar",
    "category_match",
    "exploration",
    "new_arrival",
    "price_match",
    "trending",
)
TEMPLATE = "Recommended because you've shown interest in {category}"


def explain(
    item: ItemSummary, signals: list[str] | tuple[str, ...], style: Style, *, personal: bool
) -> Explanation:
    """A template explanation of ``item`` from its rule-based ``signals``."""
    usable = usable_signals(signals, personal=personal)
    category = item.category_name
    factors = tuple(
        Factor(name=s, weight=w, description=_reason(s, category, personal=personal))
        for s, w in weights(usable)
    )
    lead = min(usable, key=HEADLINE_ORDER.index)
    if lead == "category_match":
        headline = TEMPLATE.format(category=category)
    else:
        headline = _reason(lead, category, personal=personal)
    clauses = [_clause(f.name, category, personal=personal) for f in factors]
    if style == "concise":
        detailed = headline + "."
    elif style == "detailed":
        detailed = " ".join(f.description + "." for f in factors[:MAX_DETAILED_SENTENCES])
    else:
        headline = f"We think you'll like this: {_clause(lead, category, personal=personal)}"
        detailed = f"We picked this for you because {_join(clauses)}."
    return Explanation(
        headline=headline, detailed=detailed, factors=factors, llm_generated=False, model=None
    )


def usable_signals(signals: list[str] | tuple[str, ...], *, personal: bool) -> list[str]:
    """Known signals, once each, in their order; never a personal one unless ``personal``;
    ``DEFAULT_SIGNAL`` when none is left."""
    usable: list[str] = []
    for s in signals:
        if s in WORDING and s not in usable and (personal or s not in PERSONAL_SIGNALS):
            usable.append(s)
    return usable or [DEFAULT_SIGNAL]


def weights(signals: list[str]) -> list[tuple[str, float]]:
    """Each signal's share of the importance, heaviest first (stable), summing to 1."""
    ordered = sorted(signals, key=lambda s: -WORDING[s].importance)
    total = sum(WORDING[s].importance for s in ordered)
    # Largest remainders: whole cents first, the cents left to the largest fractions (the
    # earlier on a tie), so the weights sum to 1 and stay in the importance order.
    shares = [100 * WORDING[s].importance / total for s in ordered]
    cents = [math.floor(x) for x in shares]
    by_fraction = sorted(range(len(shares)), key=lambda i: -(shares[i] - cents[i]))
    for i in by_fraction[: 100 - sum(cents)]:
        cents[i] += 1
    return [(s, c / 100) for s, c in zip(ordered, cents, strict=True)]


def _reason(signal: str, category: str, *, personal: bool) -> str:
    wording = WORDING[signal]
    text = wording.shared_reason if not personal and wording.shared_reason else wording.reason
    return text.format(category=category)


def _clause(signal: str, category: str, *, personal: bool) -> str:
    wording = WORDING[signal]
    text = wording.shared_clause if not personal and wording.shared_clause else wording.clause
    return text.format(category=category)


def _join(clauses: list[str]) -> str:
    if len(clauses) == 1:
        return clauses[0]
    return ", ".join(clauses[:-1]) + " and " + clauses[-1]
