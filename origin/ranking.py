"""The ranking pipeline after retrieval, a pure function of its inputs and an injected RNG:

1. posteriors of the candidates, decayed toward the prior and with cold items' priors
   inherited from similar items (``bandit``);
2. the 64 context features and the segment's logistic context model (``context_features``);
3. one Thompson draw per candidate, blended with the retrieval score (Algorithm 2), then
   shifted by the user's explicit category preferences (``preferences.score_shift``);
4. emotion-aware re-ranking with the rules that fired recorded (Algorithm 4);
5. the diversity constraint over the positions shown;
6. the minimum exploration floor;
7. template explanations (``explanations``).

``exploration_rate`` (the request's option) replaces the exploration weight; 0 turns
exploration off entirely, the floor included. ``diversity_weight`` is the minimum category
diversity of Algorithm 4 (default 0.3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from origin.bandit import BanditConfig, Decision, Posteriors, cold_priors, decayed, sample
from origin.bandit import exploration_floor as apply_floor
from origin.context_features import (
    CATEGORY_UNSEEN_COLUMN,
    PRICE_MATCH_COLUMN,
    UserProfile,
    extract,
)
from origin.emotion import EmotionalState, is_positive
from origin.explanations import Evidence, primary_reason, signals_of
from origin.item_index import NEW_ARRIVAL_FRESHNESS, TOP_DEMAND_POPULARITY, ItemIndex
from origin.preferences import score_shift
from origin.rerank import (
    DEFAULT_MIN_DIVERSITY,
    DIVERSITY_RULE,
    CandidateTraits,
    max_per_category,
    rerank,
    rule_names,
)
from origin.rerank import diversify as apply_diversity
from origin.retrieval import Candidates, Source
from origin.user_state import ENGAGED_ACTIONS
from protocol.api import Source as ApiSource

FLOOR_RULE = "exploration_floor"
# Recorded for an item whose score a stated category preference raised or lowered.
PREFERRED_RULE = "preference_positive"
AVOIDED_RULE = "preference_negative"

_API_SOURCE: dict[int, ApiSource] = {
    Source.COLLABORATIVE: "collaborative",
    Source.CONTENT: "content",
    Source.TRENDING: "trending",
    Source.FRESH: "trending",
}
SOURCE_NAME = {
    Source.COLLABORATIVE: "collaborative",
    Source.CONTENT: "content",
    Source.TRENDING: "trending",
    Source.FRESH: "fresh",
}


@dataclass(frozen=True, slots=True)
class Ranked:
    row: int
    score: float
    source: ApiSource
    exploration: bool
    signals: tuple[str, ...]
    reason: str
    rules: tuple[str, ...]
    uncertainty: float
    llm_generated: bool = False  # ``reason`` is the LLM tier's headline (origin.speculation)


@dataclass(frozen=True)
class Ranking:
    items: list[Ranked]

    @property
    def exploration_applied(self) -> bool:
        return any(item.exploration for item in self.items)


@dataclass(frozen=True)
class RankingOptions:
    count: int
    exploration_rate: float | None = None
    diversity_weight: float | None = None
    personal: bool = True


def traits_of(
    index: ItemIndex,
    candidates: Candidates,
    profile: UserProfile,
    exploration: npt.NDArray[np.bool_],
) -> CandidateTraits:
    rows = candidates.rows
    session = profile.recent[: profile.session_length]
    session_rows = [r for r in profile.recent_rows[: profile.session_length] if r is not None]
    engaged = [
        r
        for r, i in zip(profile.recent_rows[: profile.session_length], session, strict=True)
        if r is not None and is_positive(i)
    ]
    familiar = {
        index.category_code(i.category)
        for i in profile.recent
        if i.category and i.action in ENGAGED_ACTIONS
    }
    session_codes = {index.category_code(c) for c in profile.session_categories}
    category = index.category[rows]
    in_session_category = np.isin(category, [c for c in session_codes if c is not None])
    return CandidateTraits(
        aspirational=(index.price_bucket[rows] == 4)
        | (index.popularity[rows] >= TOP_DEMAND_POPULARITY)
        | (index.freshness[rows] >= NEW_ARRIVAL_FRESHNESS),
        engaged_before=np.isin(rows, engaged),
        familiar=np.isin(category, [c for c in familiar if c is not None]),
        short=index.content_length[rows] == 0,
        long=index.content_length[rows] == 2,
        confidence=candidates.base,
        exploration=exploration,
        clear_cta=index.in_stock[rows] & ~index.limited[rows],
        comparison=in_session_category & ~np.isin(rows, session_rows),
        novel_category=~in_session_category,
    )


def rank(
    index: ItemIndex,
    candidates: Candidates,
    *,
    profile: UserProfile,
    emotion: EmotionalState,
    posteriors: Posteriors,
    context_weights: npt.NDArray[np.float32],
    rng: np.random.Generator,
    config: BanditConfig,
    options: RankingOptions,
    now_ms: int,
    preferences: Mapping[int, float] | None = None,
) -> Ranking:
    """``preferences``: the user's signed preference strengths by category code."""
    n = len(candidates)
    if n == 0:
        return Ranking([])
    rows = candidates.rows
    category = index.category[rows]
    posteriors = cold_priors(
        decayed(posteriors, now_ms, config), category, config, content=candidates.base
    )
    features = extract(profile, index, rows)
    logits = (features @ context_weights).astype(np.float64)
    epsilon = (
        options.exploration_rate
        if options.exploration_rate is not None
        else config.exploration_weight
    )
    decision = sample(
        rng, posteriors, logits, candidates.base, exploration_weight=epsilon, config=config
    )
    if epsilon == 0:
        decision = Decision(
            decision.sampled, decision.final, np.zeros(n, dtype=bool), decision.uncertainty
        )
    shift = score_shift(category, preferences or {})
    traits = traits_of(index, candidates, profile, decision.exploration)
    order, adjusted, fired = rerank(decision.final + shift, emotion, traits)
    min_diversity = (
        options.diversity_weight if options.diversity_weight is not None else DEFAULT_MIN_DIVERSITY
    )
    order, deferred = apply_diversity(order, category, options.count, min_diversity)
    forced = np.empty(0, np.intp)
    if epsilon > 0:
        order, forced = apply_floor(
            order,
            decision,
            options.count,
            config.min_exploration,
            category=category,
            cap=max_per_category(options.count, min_diversity),
        )

    deferred_set = {int(c) for c in deferred}
    forced_set = {int(c) for c in forced}
    price_match = features[:, PRICE_MATCH_COLUMN] == 1
    affinity = features[:, CATEGORY_UNSEEN_COLUMN] == 0
    items = []
    for position in order[: options.count]:
        c = int(position)
        exploration = bool(decision.exploration[c]) or c in forced_set
        source = Source(int(candidates.source[c]))
        rules = rule_names(fired[c])
        if c in deferred_set:
            rules.append(DIVERSITY_RULE)
        if c in forced_set:
            rules.append(FLOOR_RULE)
        if shift[c] != 0:
            rules.append(PREFERRED_RULE if shift[c] > 0 else AVOIDED_RULE)
        row = int(rows[c])
        evidence = Evidence(
            source=SOURCE_NAME[source],
            exploration=exploration,
            category_name=index.items[row].category_name,
            popularity=float(index.popularity[row]),
            freshness=float(index.freshness[row]),
            category_affinity=bool(affinity[c]),
            engaged_before=bool(traits.engaged_before[c]),
            price_match=bool(price_match[c]),
        )
        signals = signals_of(evidence, personal=options.personal)
        items.append(
            Ranked(
                row=row,
                score=round(float(adjusted[c]), 6),
                source="exploration" if exploration else _API_SOURCE[source],
                exploration=exploration,
                signals=tuple(signals),
                reason=primary_reason(evidence, signals, personal=options.personal),
                rules=tuple(rules),
                uncertainty=round(float(decision.uncertainty[c]), 6),
            )
        )
    return Ranking(items)
