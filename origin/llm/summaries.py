"""What the LLM tier is told about one user and one item, from what the origin holds: the
user's ranking history and preferences, the catalog index, the rule-based signals of
``origin.ranking.explanations``. Plain functions over plain data; the request path reads the user
first (``origin.http.feature_reads.read_user``).

Only the requesting user's state goes in (by construction: it is the one argument that
carries user data); the category trend is catalog-wide, never another user's activity.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from origin.catalog.item_index import ItemIndex
from origin.llm.model import ItemSummary, RecommendationSummary, UserSummary
from origin.ranking.emotion import EmotionalState, ScrollBehavior
from origin.ranking.explanations import Evidence, signals_of
from origin.ranking.history import RankingHistory
from protocol.actions import ENGAGED_ACTIONS

RECENT_ACTIVITY = 8  # interactions described, newest first
SIMILAR_VIEWED = 3
# Cosine similarity above which a viewed item counts as "similar" to the explained one.
SIMILAR_COSINE = 0.6
# A viewed price within this factor of the item's counts as a price match (as ranking does).
PRICE_MATCH = 1.25


def item_summary(index: ItemIndex, row: int) -> ItemSummary:
    item = index.items[row]
    return ItemSummary(
        item_id=item.item_id,
        title=item.title,
        category=item.category,
        category_name=item.category_name,
        brand=item.brand,
        price=float(item.price),
        popularity=float(index.popularity[row]),
        freshness=float(index.freshness[row]),
    )


def user_summary(
    state: RankingHistory,
    index: ItemIndex,
    row: int,
    *,
    segment: str,
    preferences: Mapping[str, float],
    emotion: EmotionalState,
) -> UserSummary:
    """The user's side: preferences they stated, what they did lately, the mood of their
    session, and which of the items they viewed resemble the one explained."""
    recent = []
    similar: list[str] = []
    for interaction in state.interactions[:RECENT_ACTIVITY]:
        seen = index.row_of.get(interaction.item_id)
        title = index.items[seen].title if seen is not None else interaction.item_id
        recent.append(f"{_verb(interaction.action)} {title}")
        if (
            seen is not None
            and seen != row
            and len(similar) < SIMILAR_VIEWED
            and float(np.dot(index.vectors[seen], index.vectors[row])) >= SIMILAR_COSINE
            and title not in similar
        ):
            similar.append(title)
    stated = tuple(
        f"{'likes' if strength > 0 else 'avoids'} {category}"
        for category, strength in sorted(preferences.items(), key=lambda kv: -abs(kv[1]))
    )
    return UserSummary(
        segment=segment,
        interaction_count=len(state.interactions),
        preferences=stated,
        recent_activity=tuple(recent),
        emotional_state=describe_emotion(emotion),
        similar_viewed=tuple(similar),
    )


def describe_emotion(emotion: EmotionalState) -> str:
    engagement = "high engagement" if emotion.engagement_velocity > 0.5 else "calm browsing"
    if emotion.frustration > 0.5:
        mood = "frustrated, not finding what they want"
    elif emotion.scroll_behavior is ScrollBehavior.DECIDING:
        mood = "decision mode"
    elif emotion.sentiment > 0.3:
        mood = "positive"
    else:
        mood = "exploring"
    return f"{engagement}, {mood}"


def evidence_for(state: RankingHistory, index: ItemIndex, row: int) -> Evidence:
    """Why the item would be recommended to this user, in the ranking's own terms."""
    item = index.items[row]
    categories = {i.category for i in state.interactions if i.category}
    engaged_before = any(
        i.item_id == item.item_id and i.action in ENGAGED_ACTIONS for i in state.interactions
    )
    viewed_rows = [index.row_of.get(i.item_id) for i in state.interactions]
    prices = [float(index.price[r]) for r in viewed_rows if r is not None]
    price_match = bool(prices) and (
        min(prices) / PRICE_MATCH <= item.price <= max(prices) * PRICE_MATCH
    )
    similar = any(
        r is not None
        and r != row
        and float(np.dot(index.vectors[r], index.vectors[row])) >= SIMILAR_COSINE
        for r in viewed_rows
    )
    if not state.interactions:
        source = "trending"
    elif similar:
        source = "content"
    elif item.category in categories:
        source = "collaborative"
    else:
        source = "trending"
    return Evidence(
        source=source,
        exploration=False,
        category_name=item.category_name,
        popularity=float(index.popularity[row]),
        freshness=float(index.freshness[row]),
        category_affinity=item.category in categories,
        engaged_before=engaged_before,
        price_match=price_match,
    )


def recommendation_summary(
    index: ItemIndex, row: int, evidence: Evidence, *, personal: bool
) -> RecommendationSummary:
    """Source, a confidence from the evidence, the runners-up in the category, its trend."""
    signals = tuple(signals_of(evidence, personal=personal))
    category = index.category[row]
    same = np.flatnonzero(index.category == category)
    others = same[same != row]
    runners_up = others[np.argsort(-index.popularity[others], kind="stable")[:3]]
    top = index.trending_order[: max(1, len(index) // 10)]
    in_top = int(np.count_nonzero(index.category[top] == category))
    confidence = min(1.0, 0.4 + 0.15 * len(signals) + 0.3 * float(index.popularity[row]))
    return RecommendationSummary(
        source=evidence.source,
        confidence=round(confidence, 2),
        alternatives=tuple(index.items[int(r)].title for r in runners_up),
        signals=signals,
        category_trend=(
            f"{index.items[row].category_name}: {in_top} of the {len(top)} most popular items"
        ),
    )


def _verb(action: str) -> str:
    return {
        "view": "viewed",
        "click": "clicked",
        "add_to_cart": "added to cart",
        "purchase": "bought",
        "dismiss": "dismissed",
    }.get(action, action)
