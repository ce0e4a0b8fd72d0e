"""The ranking after retrieval, a pure function of its inputs and an injected RNG:

1. each candidate's score on the probit scale (``relevance.slate``): a draw of the item's
   engagement rate in the decision's context cell, plus a draw of the user's own model on
   the item's vector (personal answers only), plus the user's stated preference for its
   category (``relevance.preferences``), plus the shift that ranks it by expected value
   when its engagements are worth more (or less) than a click (``relevance.item_value``);
2. with the emotion rules on (``RankingRules.emotion``), the emotion rules' factors, as shifts
   of the score by their logarithm, bounded: a rule may reorder near-equals, never bury an
   established preference;
3. Thompson sampling: the slate is the best ``count`` by drawn score, optionally filled by
   maximal marginal relevance (``RankingOptions.diversity``), each item with its
   propensity;
4. template explanations (``explanations``).

``exploration_rate`` (the request's option) scales the draws' spread around the posterior
means: 0 ranks by the means (no exploration), 0.3 (``DEFAULT_EXPLORATION``) is plain
Thompson sampling, and the configured default (``PERSO_EXPLORATION_WEIGHT``, 0.05) draws
with a sixth of the posteriors' spread: measured on ``benchmarks.learning``'s family of
shops (tuning worlds), plain Thompson sampling over thousands of barely-seen items explores
more than it pays; 0.05 ended lower than 0.1 and 0.2 in the click-only, weak-signal and
20,000-item shops (final-tenth regret 64.0, 61.5, 75.8% against 65.8, 63.8, 79.0% at 0.1).
``diversity_weight`` scales the diversity penalty (0: none, the default).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from origin.catalog.item_index import NEW_ARRIVAL_FRESHNESS, TOP_DEMAND_POPULARITY, ItemIndex
from origin.ranking.emotion import EmotionalState, is_positive
from origin.ranking.explanations import Evidence, primary_reason, signals_of
from origin.ranking.profile import UserProfile
from origin.ranking.rerank import CandidateTraits, adjustments, fired_rules, rule_names
from origin.ranking.retrieval import Candidates, Source
from protocol.actions import ENGAGED_ACTIONS
from protocol.api import Source as ApiSource
from relevance.item_value import value_shift
from relevance.normal import cdf
from relevance.preferences import shifts_by_code
from relevance.slate import (
    DRAWS,
    PLAIN_THOMPSON_RATE,
    PRESELECT,
    ItemTerms,
    Slate,
    decide,
    diversity_for,
    mean_scores,
    spread_for,
)
from relevance.slate import Candidates as Scored
from relevance.user_model import UserModel

# An emotion rule moves a score by at most this much (probit units) either way.
EMOTION_BOUND = 0.2
# The exploration weight of plain Thompson sampling (the draws' spread is the posteriors').
DEFAULT_EXPLORATION = PLAIN_THOMPSON_RATE
# A price within this factor of the user's usual price is a match (explanations).
PRICE_MATCH_RATIO = 1.25

PREFERRED_RULE = "preference_positive"
AVOIDED_RULE = "preference_negative"

_API_SOURCE: dict[int, ApiSource] = {
    Source.COLLABORATIVE: "collaborative",
    Source.CONTENT: "content",
    Source.TRENDING: "trending",
    Source.FRESH: "trending",
    Source.LEARNED: "trending",
    # A random pick is "exploration" when the decision explores (below); ranked by its
    # means alone it won its place like any catalog-wide pick.
    Source.RANDOM: "trending",
}


def api_source(source: int) -> ApiSource:
    """What the API calls a retrieval source when the decision did not explore with it."""
    return _API_SOURCE[Source(source)]


SOURCE_NAME = {
    Source.COLLABORATIVE: "collaborative",
    Source.CONTENT: "content",
    Source.TRENDING: "trending",
    Source.FRESH: "fresh",
    Source.LEARNED: "trending",
    Source.RANDOM: "exploration",
}


@dataclass(frozen=True, slots=True)
class Ranked:
    row: int
    score: float  # the drawn engagement probability, in [0, 1]
    source: ApiSource
    exploration: bool
    signals: tuple[str, ...]
    reason: str
    rules: tuple[str, ...]
    uncertainty: float  # the item term's standard deviation (probit units)
    propensity: float = 1.0  # P(this item at this position | the policy)
    llm_generated: bool = False  # ``reason`` is the LLM tier's headline (origin.llm)


@dataclass(frozen=True)
class Ranking:
    items: list[Ranked]
    # What the decision ranked, when asked for (``rank(keep_inputs=True)``): the context
    # log's record is built from it (``origin.ranking.contexts``).
    inputs: RankedInputs | None = None

    @property
    def exploration_applied(self) -> bool:
        return any(item.exploration for item in self.items)


@dataclass(frozen=True, eq=False)
class RankedInputs:
    """A decision's candidates as the ranker scored them: their terms, each score's shift
    without the emotion rules, and what the rules add (zero for a segment-wide answer),
    whether or not they were on; and the user model ranked with (None: segment-wide)."""

    terms: ItemTerms
    shift: npt.NDArray[np.float64]
    emotion: npt.NDArray[np.float64]
    user: UserModel | None


@dataclass(frozen=True)
class RankingRules:
    """The ranking's configurable rules (``PERSO_RANKING_*``); each is measured by
    ``benchmarks.learning`` and off unless it does not cost engagement."""

    exploration_weight: float = DEFAULT_EXPLORATION
    diversity_weight: float = 0.0
    emotion: bool = False
    # The graded reward's exponent (``relevance.item_value.value_shift``): 1 ranks by
    # expected value, 0 by engagement alone.
    value_weight: float = 1.0
    preselect: int = PRESELECT
    propensity_draws: int = DRAWS


@dataclass(frozen=True)
class RankingOptions:
    count: int
    exploration_rate: float | None = None
    diversity_weight: float | None = None
    personal: bool = True
    rules: RankingRules = field(default_factory=RankingRules)

    @property
    def spread(self) -> float:
        rate = self.exploration_rate
        if rate is None:
            rate = self.rules.exploration_weight
        return spread_for(rate)

    @property
    def diversity(self) -> float:
        weight = self.diversity_weight
        if weight is None:
            weight = self.rules.diversity_weight
        return diversity_for(weight)


def traits_of(
    index: ItemIndex,
    candidates: Candidates,
    profile: UserProfile,
    confidence: npt.NDArray[np.float64],
) -> CandidateTraits:
    """The emotion rules' attributes of the candidates for this user's session."""
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
        confidence=confidence,
        exploration=candidates.source == Source.RANDOM,
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
    user: UserModel | None,
    alpha: npt.NDArray[np.float64],
    beta: npt.NDArray[np.float64],
    rng: np.random.Generator,
    options: RankingOptions,
    preferences: Mapping[int, float] | None = None,
    value: npt.NDArray[np.float64] | None = None,
    keep_inputs: bool = False,
) -> Ranking:
    """``alpha`` and ``beta``: the candidates' effective posteriors in the decision's
    context cell (``origin.learned.posteriors.effective``); ``preferences``: the user's
    signed preference strengths by category code; ``value``: what an engagement with each
    is worth relative to a click (``origin.learned.posteriors.ItemValues.relative``; None:
    a click's worth each); ``keep_inputs``: keep what was ranked in the ranking
    (``Ranking.inputs``), the emotion rules' shifts computed whether or not the rules are on."""
    n = len(candidates)
    if n == 0:
        return Ranking([])
    rows = candidates.rows
    preferred = shifts_by_code(index.category[rows], preferences or {})
    fired, emotion_shift = _emotion_rules(
        index,
        candidates,
        profile,
        emotion=emotion,
        alpha=alpha,
        beta=beta,
        options=options,
        keep_inputs=keep_inputs,
    )
    emotional = options.rules.emotion and options.personal
    shift = preferred + emotion_shift if emotional else preferred
    # Computed once for both of the decision's reads of the candidates.
    terms = ItemTerms.of(index.vectors[rows], alpha, beta, index.tie_keys[rows])
    model = user if options.personal else None
    weight = options.rules.value_weight
    if value is not None and weight > 0 and bool(np.any(value != 1.0)):
        mean, _ = mean_scores(Scored.with_terms(terms, shift), model)
        shift = shift + value_shift(mean, value, weight)
    slate = decide(
        Scored.with_terms(terms, shift),
        model,
        options.count,
        rng,
        spread=options.spread,
        diversity=options.diversity,
        preselect=options.rules.preselect,
        draws=options.rules.propensity_draws,
    )
    inputs = None
    if keep_inputs:
        plain = shift - emotion_shift if emotional else shift
        inputs = RankedInputs(terms, plain, emotion_shift, model)
    items = _explained(
        index,
        candidates,
        slate,
        profile=profile,
        alpha=alpha,
        beta=beta,
        options=options,
        fired=fired,
        preferred=preferred,
    )
    return Ranking(items, inputs)


def _emotion_rules(
    index: ItemIndex,
    candidates: Candidates,
    profile: UserProfile,
    *,
    emotion: EmotionalState,
    alpha: npt.NDArray[np.float64],
    beta: npt.NDArray[np.float64],
    options: RankingOptions,
    keep_inputs: bool,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
    """The emotion rules fired for each candidate (none while the rules are off) and the
    bounded shifts they make (computed for ``keep_inputs`` whether or not the rules are on);
    neither for an answer that is not personal."""
    n = len(candidates)
    none_fired = np.zeros((n, 0), bool)
    if not ((options.rules.emotion or keep_inputs) and options.personal):
        return none_fired, np.zeros(n)
    mean = alpha / (alpha + beta)
    fired = fired_rules(emotion, traits_of(index, candidates, profile, mean))
    emotion_shift = np.clip(np.log(adjustments(fired)), -EMOTION_BOUND, EMOTION_BOUND)
    return (fired if options.rules.emotion else none_fired), emotion_shift


def _explained(
    index: ItemIndex,
    candidates: Candidates,
    slate: Slate,
    *,
    profile: UserProfile,
    alpha: npt.NDArray[np.float64],
    beta: npt.NDArray[np.float64],
    options: RankingOptions,
    fired: npt.NDArray[np.bool_],
    preferred: npt.NDArray[np.float64],
) -> list[Ranked]:
    """The slate's items as answered: score, source, signals, reason, rules, uncertainty."""
    rows = candidates.rows
    m = alpha / (alpha + beta)
    item_sd = np.sqrt(m * (1 - m) / (alpha + beta + 1))
    affinity = _category_affinity(index, profile, index.category[rows])
    price_match = _price_match(index, profile, rows)
    # "You showed interest in this": not an item the user dismissed or glanced at.
    shown_interest = {
        r for r, i in zip(profile.recent_rows, profile.recent, strict=True) if is_positive(i)
    }
    items = []
    for chosen, score, propensity, explored in zip(
        slate.rows, slate.scores, slate.propensities, slate.exploration, strict=True
    ):
        c = int(chosen)
        source = Source(int(candidates.source[c]))
        row = int(rows[c])
        # Spread 0 ranks by the means: nothing shown is exploration, a random pick included.
        exploration = bool(explored) or (source == Source.RANDOM and options.spread > 0)
        evidence = Evidence(
            source=SOURCE_NAME[source],
            exploration=exploration,
            category_name=index.items[row].category_name,
            popularity=float(index.popularity[row]),
            freshness=float(index.freshness[row]),
            category_affinity=bool(affinity[c]),
            engaged_before=row in shown_interest,
            price_match=bool(price_match[c]),
        )
        signals = signals_of(evidence, personal=options.personal)
        items.append(
            Ranked(
                row=row,
                score=round(float(cdf(np.array([score]))[0]), 6),
                source="exploration" if exploration else api_source(source),
                exploration=exploration,
                signals=tuple(signals),
                reason=primary_reason(evidence, signals, personal=options.personal),
                rules=_rules_of(fired[c], float(preferred[c])),
                uncertainty=round(float(item_sd[c]), 6),
                propensity=float(propensity),
            )
        )
    return items


def _rules_of(fired: npt.NDArray[np.bool_], preferred: float) -> tuple[str, ...]:
    """The rules that moved an item: the emotion rules that fired for it, then its stated
    preference alone (the emotion rules' shifts are named by their rules)."""
    rules = rule_names(fired) if fired.shape[0] else []
    if preferred > 0:
        rules.append(PREFERRED_RULE)
    elif preferred < 0:
        rules.append(AVOIDED_RULE)
    return tuple(rules)


def _category_affinity(
    index: ItemIndex, profile: UserProfile, category: npt.NDArray[np.integer]
) -> npt.NDArray[np.bool_]:
    """Candidates of a category the user engaged with recently."""
    codes = {
        index.category_code(i.category)
        for i in profile.recent
        if i.category and i.action in ENGAGED_ACTIONS
    }
    return np.isin(category, [c for c in codes if c is not None])


def _price_match(
    index: ItemIndex, profile: UserProfile, rows: npt.NDArray[np.intp]
) -> npt.NDArray[np.bool_]:
    """Candidates within ``PRICE_MATCH_RATIO`` of the user's usual price (the median log
    price of what they engaged with)."""
    usual = profile.price_preference
    if usual is None:
        return np.zeros(rows.shape[0], bool)
    out: npt.NDArray[np.bool_] = np.abs(index.log_price[rows] - usual) <= np.log(PRICE_MATCH_RATIO)
    return out
