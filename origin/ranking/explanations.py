"""Explanations without an LLM (fallback generation): rule-based signals and a
template reason per ranked item; the LLM tier is the only other source (``llm_generated``).

Signals: ``viewed_similar`` (near the session's items), ``category_match`` (a category the
user engaged with, or near the user's embedding), ``previously_engaged``, ``price_match``
(within 25 % of the user's usual price), ``trending`` (top 10 % demand, or a trending pick),
``new_arrival`` and ``exploration``. An answer for a whole segment (``personal=False``)
never mentions the user's own history: it is shared by many users.
"""

from __future__ import annotations

from dataclasses import dataclass

from origin.catalog.item_index import NEW_ARRIVAL_FRESHNESS, TOP_DEMAND_POPULARITY


@dataclass(frozen=True, slots=True)
class Evidence:
    """What is known about one ranked item, as far as explanations care."""

    source: str  # collaborative | content | trending | fresh
    exploration: bool
    category_name: str
    popularity: float
    freshness: float
    category_affinity: bool  # the user engaged with this category recently
    engaged_before: bool
    price_match: bool


_PERSONAL = frozenset({"viewed_similar", "category_match", "previously_engaged", "price_match"})


def signals_of(evidence: Evidence, *, personal: bool) -> list[str]:
    """The signals ``evidence`` supports, in a fixed order (exploration first). Without
    ``personal`` those drawn from the user's own history are left out, since a segment's
    answer is shared. Never empty: ``trending`` (``new_arrival`` for a fresh item) stands in
    when nothing else applies."""
    signals: list[str] = []

    def add(signal: str) -> None:
        if signal not in signals and (personal or signal not in _PERSONAL):
            signals.append(signal)

    if evidence.exploration:
        add("exploration")
    if evidence.source == "content":
        add("viewed_similar")
    if evidence.source == "collaborative" or evidence.category_affinity:
        add("category_match")
    if evidence.engaged_before:
        add("previously_engaged")
    if evidence.price_match:
        add("price_match")
    if evidence.source == "trending" or evidence.popularity >= TOP_DEMAND_POPULARITY:
        add("trending")
    if evidence.source == "fresh" or evidence.freshness >= NEW_ARRIVAL_FRESHNESS:
        add("new_arrival")
    if not signals:
        add("trending" if evidence.source != "fresh" else "new_arrival")
    return signals


def primary_reason(evidence: Evidence, signals: list[str], *, personal: bool) -> str:
    """The template sentence shown for the item, from the first of these among ``signals``:
    previously engaged, viewed similar, category match, exploration, a fresh new arrival;
    else popularity, worded for the user when ``personal`` and for the category otherwise."""
    category = evidence.category_name
    if "previously_engaged" in signals:
        return "You showed interest in this recently"
    if "viewed_similar" in signals:
        return "Similar to items you've viewed"
    if "category_match" in signals:
        return f"Recommended because you've shown interest in {category}"
    if "exploration" in signals:
        return f"Something new for you to discover in {category}"
    if "new_arrival" in signals and evidence.source == "fresh":
        return f"New in {category}"
    if personal:
        return "Popular among users like you"
    return f"Popular in {category} right now"
