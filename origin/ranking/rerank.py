"""Emotion-aware re-ranking with the diversity constraint.

Each rule multiplies a candidate's score and is recorded for that candidate when it fires.
The seed's thresholds and factors are kept; its candidate attributes map onto the catalog:

- aspirational ("premium", "trending", "new"): top price quintile of its category, top 10 %
  demand, or freshness >= 0.7;
- previously engaged: clicked, carted, bought or viewed at length in this session;
- familiar ("comfort", "familiar"): a category the user engaged with recently;
- short / long content: the item's ``content_length``;
- high confidence: a retrieval score above 0.8;
- clear call to action: in stock, buyable now;
- comparison: same category as an item of this session, but not that item;
- novel category: a category not seen in this session.

``diversify`` is the seed's ``ApplyDiversityConstraint`` over the window that is shown
(the seed divides by the whole candidate list, which makes the cap meaningless for 500
candidates): at most ``max(1, int(n * (1 - min_diversity)))`` of the first ``n`` from one
category; the others move behind them in their order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from origin.ranking.emotion import EmotionalState, ScrollBehavior

Flags = npt.NDArray[np.bool_]
Scores = npt.NDArray[np.float64]
Rows = npt.NDArray[np.intp]


@dataclass(frozen=True)
class Rule:
    """One emotion rule: the ``name`` recorded for a candidate when it fires and the
    ``factor`` that multiplies the candidate's score."""

    name: str
    factor: float


# In the emotion rules' order; a candidate's fired rules are a bit set over this tuple.
RULES = (
    Rule("positive_mood_aspirational", 1.1),
    Rule("negative_mood_engaged_before", 1.15),
    Rule("negative_mood_familiar", 1.1),
    Rule("high_velocity_short", 1.1),
    Rule("high_velocity_long", 0.9),
    Rule("frustrated_high_confidence", 1.2),
    Rule("frustrated_less_exploration", 0.7),
    Rule("deciding_clear_cta", 1.1),
    Rule("deciding_comparison", 1.15),
    Rule("browsing_novel_category", 1.1),
)
RULE_INDEX = {rule.name: bit for bit, rule in enumerate(RULES)}
DIVERSITY_RULE = "diversity_deferred"

SENTIMENT_HIGH = 0.3
SENTIMENT_LOW = -0.3
VELOCITY_HIGH = 5.0  # interactions per minute
FRUSTRATION_HIGH = 0.5
CONFIDENCE_HIGH = 0.8
DEFAULT_MIN_DIVERSITY = 0.3


@dataclass(frozen=True)
class CandidateTraits:
    """The emotion rules' candidate attributes, one array per attribute, aligned with the
    candidates."""

    aspirational: Flags
    engaged_before: Flags
    familiar: Flags
    short: Flags
    long: Flags
    confidence: Scores
    exploration: Flags
    clear_cta: Flags
    comparison: Flags
    novel_category: Flags


def fired_rules(state: EmotionalState, traits: CandidateTraits) -> npt.NDArray[np.bool_]:
    """(candidates, len(RULES)): which rule fires for which candidate."""
    n = traits.confidence.size
    fired = np.zeros((n, len(RULES)), dtype=bool)

    def when(name: str, condition: bool, applies: Flags) -> None:
        if condition:
            fired[:, RULE_INDEX[name]] = applies

    positive = state.sentiment > SENTIMENT_HIGH
    negative = state.sentiment < SENTIMENT_LOW
    when("positive_mood_aspirational", positive, traits.aspirational)
    when("negative_mood_engaged_before", negative, traits.engaged_before)
    when("negative_mood_familiar", negative, traits.familiar)
    fast = state.engagement_velocity > VELOCITY_HIGH
    when("high_velocity_short", fast, traits.short)
    when("high_velocity_long", fast, traits.long)
    frustrated = state.frustration > FRUSTRATION_HIGH
    when("frustrated_high_confidence", frustrated, traits.confidence > CONFIDENCE_HIGH)
    when("frustrated_less_exploration", frustrated, traits.exploration)
    deciding = state.scroll_behavior == ScrollBehavior.DECIDING
    when("deciding_clear_cta", deciding, traits.clear_cta)
    when("deciding_comparison", deciding, traits.comparison)
    browsing = state.scroll_behavior == ScrollBehavior.BROWSING
    when("browsing_novel_category", browsing, traits.novel_category)
    return fired


_FACTORS = np.array([rule.factor for rule in RULES])


def adjustments(fired: npt.NDArray[np.bool_]) -> Scores:
    """Product of the factors of the rules that fired, per candidate (1.0: none)."""
    factors: Scores = np.prod(np.where(fired, _FACTORS, 1.0), axis=1)
    return factors


def rule_names(fired_row: npt.NDArray[np.bool_]) -> list[str]:
    """The names of the rules set in one candidate's row of ``fired_rules``, in the emotion
    rules' order: the ``rules`` an item's explanation lists."""
    return [RULES[bit].name for bit in np.flatnonzero(fired_row)]


def rerank(
    scores: Scores, state: EmotionalState, traits: CandidateTraits
) -> tuple[Rows, Scores, npt.NDArray[np.bool_]]:
    """Candidates ordered by adjusted score (stable for ties), the adjusted scores and the
    rules that fired."""
    fired = fired_rules(state, traits)
    adjusted = scores * adjustments(fired)
    order = np.argsort(-adjusted, kind="stable").astype(np.intp)
    return order, adjusted, fired


def max_per_category(shown: int, min_diversity: float) -> int:
    """The diversity cap: how many of the first ``shown`` positions one category may take,
    floor(shown * (1 - min_diversity)) and at least 1."""
    # The epsilon keeps float error from rounding an exact cap down: 10 * (1 - 0.8) is
    # 1.9999999999999996 in binary floating point, but the cap is 2.
    return max(1, math.floor(shown * (1.0 - min_diversity) + 1e-9))


def diversify(
    order: Rows, category: npt.NDArray[np.integer], shown: int, min_diversity: float
) -> tuple[Rows, Rows]:
    """The diversity constraint (``ApplyDiversityConstraint``) over the first ``shown``
    positions, vectorised: walking ``order``, a candidate is taken while fewer than the cap
    of its category were taken before it, else deferred, until ``shown`` are taken. A
    candidate is taken exactly when fewer than ``cap`` candidates of its category precede it
    in ``order`` (all of those were taken), so one within-category rank decides.

    Returns the new order and the candidates that were deferred.
    """
    cap = max_per_category(shown, min_diversity)
    n = order.size
    if n == 0 or shown <= 0:
        return order.astype(np.intp), np.empty(0, np.intp)
    codes = np.asarray(category)[order]
    by_code = np.argsort(codes, kind="stable")
    sorted_codes = codes[by_code]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    group_start = np.repeat(starts, np.diff(np.r_[starts, n]))
    rank_in_category = np.empty(n, np.intp)
    rank_in_category[by_code] = np.arange(n) - group_start
    eligible = np.flatnonzero(rank_in_category < cap)
    chosen = eligible[:shown]
    used = int(chosen[-1]) + 1 if chosen.size == shown else n
    head = np.arange(used)
    deferred = head[rank_in_category[:used] >= cap]
    new_order = np.concatenate([order[chosen], order[deferred], order[used:]])
    return new_order.astype(np.intp), order[deferred].astype(np.intp)
