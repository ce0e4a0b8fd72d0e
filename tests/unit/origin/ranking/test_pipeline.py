"""The ranking after retrieval: a slate chosen from the items' posteriors and the user's
model, exploration and its propensities, diversity, the emotion rules as bounded shifts,
and what every ranked item reports (source, signals, reason, rules)."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt
import pytest

from origin.catalog.item_index import Filters, ItemIndex
from origin.learned.posteriors import PosteriorConfig, Posteriors, effective
from origin.ranking.emotion import NEUTRAL, EmotionalState, ScrollBehavior
from origin.ranking.history import Interaction, RankingHistory
from origin.ranking.pipeline import (
    AVOIDED_RULE,
    DEFAULT_EXPLORATION,
    EMOTION_BOUND,
    PREFERRED_RULE,
    PRICE_MATCH_RATIO,
    Ranking,
    RankingOptions,
    RankingRules,
    rank,
    traits_of,
)
from origin.ranking.profile import UserProfile, profile_of
from origin.ranking.rerank import RULES
from origin.ranking.retrieval import Candidates, Source, retrieve
from protocol.api import Device
from relevance.normal import ppf
from relevance.slate import DIVERSITY_SCALE
from relevance.user_model import UserModel
from tests.unit.catalogs import make_catalog

Array = npt.NDArray[np.float64]

LOCAL = datetime(2025, 6, 11, 19, 30, tzinfo=UTC)
NOW_MS = int(LOCAL.timestamp() * 1000)
IDLE_MS = 30 * 60_000
PERSONAL_SIGNALS = {"viewed_similar", "category_match", "previously_engaged", "price_match"}
EMOTION_RULES = {rule.name for rule in RULES}
FACTOR = {rule.name: rule.factor for rule in RULES}
RULE_NAMES = EMOTION_RULES | {PREFERRED_RULE, AVOIDED_RULE}
# What the API calls each retrieval source when the item is not exploration.
API_SOURCE = {
    Source.COLLABORATIVE: "collaborative",
    Source.CONTENT: "content",
    Source.LEARNED: "trending",
    Source.TRENDING: "trending",
    Source.FRESH: "trending",
    Source.RANDOM: "trending",
}
EMOTION_RULES_ON = RankingRules(emotion=True)


@pytest.fixture(scope="module")
def index() -> ItemIndex:
    return make_catalog(1_500, 21, 16).index()


def interaction(index: ItemIndex, row: int, action: str, k: int, **more: int) -> Interaction:
    item = index.items[row]
    return Interaction(
        f"ix-{k}", item.item_id, action, NOW_MS - 60_000 * (k + 1), item.category, **more
    )


def ranking_history(index: ItemIndex) -> RankingHistory:
    actions = ("click", "view", "add_to_cart", "dismiss", "click")
    return RankingHistory(
        interactions=tuple(
            interaction(index, 10 + k, action, k, **({"duration_ms": 15_000} if k == 1 else {}))
            for k, action in enumerate(actions)
        )
    )


def profile(index: ItemIndex, *, personal: bool = True) -> UserProfile:
    return profile_of(
        ranking_history(index),
        index,
        device=Device.MOBILE,
        local=LOCAL,
        now_ms=NOW_MS,
        session_idle_ms=IDLE_MS,
        user_vector=index.vectors[10].copy(),
        personal=personal,
    )


def user_model(index: ItemIndex) -> UserModel:
    return UserModel(index.vectors[10].copy(), np.full(index.dim, 0.05, np.float32))


def candidates_for(
    index: ItemIndex,
    p: UserProfile,
    *,
    budget: int = 300,
    filters: Filters | None = None,
    learned: tuple[int, ...] = (),
) -> Candidates:
    return retrieve(
        index,
        index.mask(filters or Filters()),
        budget,
        np.random.default_rng(7),
        user_vector=p.user_vector,
        session_vector=p.session_vector,
        learned=learned,
    )


def cold_candidates(index: ItemIndex, budget: int = 300) -> Candidates:
    """A user without a model or a session: trending, fresh and random picks."""
    return candidates_for(index, UserProfile(segment=None, device=None, local=LOCAL), budget=budget)


def posteriors(n: int, seed: int = 0) -> tuple[Array, Array]:
    """Observed items: engagement rates of 1-10 % on 20 to 500 examinations each."""
    rng = np.random.default_rng(seed)
    rate = rng.uniform(0.01, 0.1, n)
    evidence = rng.uniform(20.0, 500.0, n)
    return rate * evidence, (1.0 - rate) * evidence


def equal(n: int, alpha: float = 3.0, beta: float = 60.0) -> tuple[Array, Array]:
    return np.full(n, alpha), np.full(n, beta)


def trending(rows: npt.NDArray[np.intp] | list[int]) -> Candidates:
    rows = np.asarray(rows, np.intp)
    return Candidates(rows, np.full(rows.size, Source.TRENDING, np.int8))


def run(
    index: ItemIndex,
    candidates: Candidates,
    options: RankingOptions,
    *,
    p: UserProfile | None = None,
    emotion: EmotionalState = NEUTRAL,
    user: UserModel | None = None,
    alpha_beta: tuple[Array, Array] | None = None,
    preferences: dict[int, float] | None = None,
    value: Array | None = None,
    seed: int = 0,
) -> Ranking:
    alpha, beta = alpha_beta if alpha_beta is not None else posteriors(len(candidates))
    return rank(
        index,
        candidates,
        profile=p if p is not None else profile(index),
        emotion=emotion,
        user=user,
        alpha=alpha,
        beta=beta,
        rng=np.random.default_rng(seed),
        options=options,
        preferences=preferences,
        value=value,
    )


def rows_of(ranking: Ranking) -> list[int]:
    return [item.row for item in ranking.items]


@pytest.mark.parametrize(
    ("value_weight", "first"),
    [(1.0, "bought"), (0.0, "clicked"), (0.5, "bought")],
    ids=["expected-value", "engagement-only", "half-weight"],
)
def test_items_rank_by_what_their_engagements_are_worth(
    index: ItemIndex, value_weight: float, first: str
) -> None:
    rows = trending([100, 200, 300])
    # "clicked" is engaged with a little more often; "bought"'s engagements end in purchases
    alpha, beta = np.array([40.0, 30.0, 10.0]), np.array([960.0, 970.0, 990.0])
    value = np.array([1.0, 3.5, 1.0])
    rules = RankingRules(exploration_weight=0.0, value_weight=value_weight)
    ranking = run(
        index, rows, RankingOptions(3, rules=rules), alpha_beta=(alpha, beta), value=value
    )
    names = {100: "clicked", 200: "bought", 300: "dull"}
    assert names[rows_of(ranking)[0]] == first
    assert names[rows_of(ranking)[-1]] == "dull"


def test_a_clicks_worth_everywhere_ranks_as_engagement_alone(index: ItemIndex) -> None:
    c = cold_candidates(index)
    options = RankingOptions(10)
    plain = run(index, c, options, user=user_model(index), seed=4)
    valued = run(index, c, options, user=user_model(index), value=np.ones(len(c)), seed=4)
    assert rows_of(valued) == rows_of(plain)
    assert [i.propensity for i in valued.items] == [i.propensity for i in plain.items]


def emotion_shift(rules: tuple[str, ...]) -> float:
    """The score shift the emotion rules in ``rules`` make, bounded."""
    total = sum(math.log(FACTOR[r]) for r in rules if r in FACTOR)
    return max(-EMOTION_BOUND, min(EMOTION_BOUND, total))


# --- the slate ---------------------------------------------------------------------------


def test_no_candidates_no_items(index: ItemIndex) -> None:
    ranking = run(index, trending([]), RankingOptions(count=10))
    assert ranking.items == []
    assert not ranking.exploration_applied


@pytest.mark.parametrize("count", [1, 5, 20, 50])
@pytest.mark.parametrize("exploration_rate", [None, 0.0, 1.0], ids=["default", "off", "full"])
@pytest.mark.parametrize("diversity", [None, 0.0, 0.8], ids=["d-default", "d0", "d08"])
@pytest.mark.parametrize("personal", [True, False], ids=["user", "segment"])
def test_a_slate_is_count_distinct_well_formed_items(
    index: ItemIndex,
    count: int,
    exploration_rate: float | None,
    diversity: float | None,
    personal: bool,
) -> None:
    p = profile(index, personal=personal)
    c = candidates_for(index, profile(index))
    options = RankingOptions(count, exploration_rate, diversity, personal, EMOTION_RULES_ON)
    ranking = run(index, c, options, p=p, user=user_model(index), seed=count)
    rows = rows_of(ranking)
    assert len(rows) == len(set(rows)) == count
    assert set(rows) <= set(c.rows.tolist())
    for item in ranking.items:
        assert set(item.rules) <= RULE_NAMES
        assert item.signals
        assert item.reason
        assert item.exploration == (item.source == "exploration")
        assert 0.0 <= item.score <= 1.0
        assert 0.0 < item.uncertainty <= 0.5
        assert 0.0 < item.propensity <= 1.0
        assert not item.llm_generated
    assert ranking.exploration_applied == any(item.exploration for item in ranking.items)


def test_fewer_candidates_than_count_are_all_ranked(index: ItemIndex) -> None:
    ranking = run(index, trending([0, 1, 2, 3]), RankingOptions(count=10))
    assert sorted(rows_of(ranking)) == [0, 1, 2, 3]


def test_same_seed_same_ranking(index: ItemIndex) -> None:
    c = candidates_for(index, profile(index))
    options = RankingOptions(count=20, diversity_weight=0.5, rules=EMOTION_RULES_ON)
    emotion = EmotionalState(scroll_behavior=ScrollBehavior.DECIDING)
    a = run(index, c, options, user=user_model(index), emotion=emotion, seed=5)
    b = run(index, c, options, user=user_model(index), emotion=emotion, seed=5)
    assert a == b
    # and the seed is what varies an exploring ranking
    others = {
        tuple(rows_of(run(index, c, options, user=user_model(index), seed=s))) for s in range(5)
    }
    assert len(others) > 1


@pytest.mark.parametrize("draws", [7, 63])
@pytest.mark.parametrize("with_user", [False, True], ids=["segment", "user"])
def test_propensities_are_shares_of_the_policys_runs(
    index: ItemIndex, draws: int, with_user: bool
) -> None:
    c = cold_candidates(index)
    rules = RankingRules(propensity_draws=draws)
    user = user_model(index) if with_user else None
    uncertain = equal(len(c), 2.0, 30.0)
    seen: list[float] = []
    for seed in range(5):
        ranking = run(
            index, c, RankingOptions(20, rules=rules), user=user, alpha_beta=uncertain, seed=seed
        )
        for item in ranking.items:
            # at least the served run's own share, at most certain, in steps of one run
            assert 1 / (draws + 1) - 1e-12 <= item.propensity <= 1.0
            runs = item.propensity * (draws + 1)
            assert runs == pytest.approx(round(runs))
            seen.append(item.propensity)
    assert min(seen) < 1.0  # uncertain posteriors: the policy does vary


@pytest.mark.parametrize("with_user", [False, True], ids=["segment", "user"])
@pytest.mark.parametrize("count", [1, 10, 40])
def test_exploration_weight_zero_ranks_greedily_by_mean(
    index: ItemIndex, with_user: bool, count: int
) -> None:
    c = cold_candidates(index)
    alpha, beta = posteriors(len(c), seed=3)
    # the best items by far are random picks: ranked by their means they are no exploration
    random_picks = np.flatnonzero(c.source == Source.RANDOM)[:3]
    alpha[random_picks], beta[random_picks] = 900.0, 100.0
    user = user_model(index) if with_user else None
    mean = ppf(alpha / (alpha + beta))
    if user is not None:
        mean = mean + index.vectors[c.rows].astype(np.float64) @ user.mean.astype(np.float64)
    expected = c.rows[np.argsort(-mean, kind="stable")[:count]].tolist()
    rules = RankingRules(exploration_weight=0.0, preselect=len(c))
    for seed in range(3):
        ranking = run(
            index,
            c,
            RankingOptions(count, rules=rules),
            user=user,
            alpha_beta=(alpha, beta),
            seed=seed,
        )
        assert rows_of(ranking) == expected
        assert not ranking.exploration_applied
        for item in ranking.items:
            assert item.propensity == 1.0
            assert item.source != "exploration"
            assert "exploration" not in item.signals
    top = run(index, c, RankingOptions(3, rules=rules), user=user, alpha_beta=(alpha, beta))
    assert set(rows_of(top)) == set(c.rows[random_picks].tolist())
    assert [item.source for item in top.items] == ["trending"] * 3


@pytest.mark.parametrize(
    ("rate", "weight", "spread"),
    [
        (None, DEFAULT_EXPLORATION, 1.0),  # the default: plain Thompson sampling
        (None, 0.0, 0.0),
        (None, 0.6, 2.0),
        (0.0, DEFAULT_EXPLORATION, 0.0),  # the request's rate wins over the configured one
        (0.15, 0.0, 0.5),
        (1.0, DEFAULT_EXPLORATION, 1 / DEFAULT_EXPLORATION),
    ],
)
def test_spread_of_the_draws(rate: float | None, weight: float, spread: float) -> None:
    options = RankingOptions(10, rate, rules=RankingRules(exploration_weight=weight))
    assert options.spread == pytest.approx(spread)


@pytest.mark.parametrize(
    ("weight", "configured", "diversity"),
    [
        (None, 0.0, 0.0),
        (None, 0.5, 0.5 * DIVERSITY_SCALE),
        (0.0, 0.5, 0.0),
        (1.0, 0.0, DIVERSITY_SCALE),
    ],
)
def test_diversity_of_the_options(
    weight: float | None, configured: float, diversity: float
) -> None:
    options = RankingOptions(
        10, diversity_weight=weight, rules=RankingRules(diversity_weight=configured)
    )
    assert options.diversity == pytest.approx(diversity)


def test_uncertain_posteriors_explore_and_say_so(index: ItemIndex) -> None:
    c = trending(np.arange(200))
    explored = 0
    for seed in range(5):
        ranking = run(index, c, RankingOptions(10), alpha_beta=equal(200, 1.0, 1.0), seed=seed)
        for item in ranking.items:
            if item.exploration:
                explored += 1
                assert item.source == "exploration"
                assert "exploration" in item.signals
                assert item.propensity < 1.0
    assert explored > 0


def test_certain_posteriors_do_not_explore(index: ItemIndex) -> None:
    c = trending(np.arange(200))
    rate = np.linspace(0.2, 0.01, 200)
    certain = (rate * 1e8, (1 - rate) * 1e8)
    for seed in range(5):
        ranking = run(index, c, RankingOptions(10), alpha_beta=certain, seed=seed)
        assert rows_of(ranking) == list(range(10))
        assert not ranking.exploration_applied
        assert all(item.propensity == 1.0 for item in ranking.items)


def test_random_picks_are_exploration_when_the_ranking_explores(index: ItemIndex) -> None:
    c = cold_candidates(index)
    alpha, beta = posteriors(len(c))
    random_picks = np.flatnonzero(c.source == Source.RANDOM)[:3]
    alpha[random_picks], beta[random_picks] = 900.0, 100.0
    ranking = run(index, c, RankingOptions(5), alpha_beta=(alpha, beta))
    chosen = {int(r) for r in c.rows[random_picks]}
    picked = [item for item in ranking.items if item.row in chosen]
    assert len(picked) == 3
    assert all(item.exploration and item.source == "exploration" for item in picked)


# --- the user's model --------------------------------------------------------------------


def category_model(index: ItemIndex, code: int, strength: float = 3.0) -> UserModel:
    """A confident user who engages with one category's items."""
    centre = index.vectors[index.category == code].mean(axis=0)
    centre /= np.linalg.norm(centre)
    return UserModel((strength * centre).astype(np.float32), np.full(index.dim, 1e-4, np.float32))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("exploration_rate", [None, 0.0], ids=["default", "off"])
def test_a_confident_user_model_puts_matching_items_first(
    index: ItemIndex, seed: int, exploration_rate: float | None
) -> None:
    c = cold_candidates(index)
    codes = index.category[c.rows]
    liked = int(np.bincount(codes).argmax())
    assert np.count_nonzero(codes == liked) >= 10
    same = equal(len(c))
    options = RankingOptions(10, exploration_rate)
    ranking = run(index, c, options, user=category_model(index, liked), alpha_beta=same, seed=seed)
    assert [int(index.category[r]) for r in rows_of(ranking)] == [liked] * 10
    # the item term alone ranks otherwise
    plain = run(index, c, options, alpha_beta=same, seed=seed)
    assert any(int(index.category[r]) != liked for r in rows_of(plain))


def test_a_shared_answer_ignores_the_user_model(index: ItemIndex) -> None:
    c = cold_candidates(index)
    liked = int(np.bincount(index.category[c.rows]).argmax())
    shared = RankingOptions(10, personal=False)
    with_model = run(index, c, shared, user=category_model(index, liked), seed=4)
    without = run(index, c, shared, seed=4)
    assert rows_of(with_model) == rows_of(without)


@pytest.mark.parametrize("count", [1, 20, 100])
@pytest.mark.parametrize("exploration_rate", [None, 0.0], ids=["default", "posteriors-down"])
def test_a_new_user_without_a_model_gets_a_full_slate(
    index: ItemIndex, count: int, exploration_rate: float | None
) -> None:
    p = profile_of(
        RankingHistory(),
        index,
        device=None,
        local=LOCAL,
        now_ms=NOW_MS,
        session_idle_ms=IDLE_MS,
        user_vector=None,
    )
    assert p.user_vector is None
    assert p.session_vector is None
    c = candidates_for(index, p, learned=tuple(range(100, 160)))
    config = PosteriorConfig()
    nothing = Posteriors.prior(len(c), config)  # nothing learnt about any item yet
    alpha, beta = effective(nothing, nothing, index.category[c.rows], NOW_MS, config)
    ranking = run(index, c, RankingOptions(count, exploration_rate), p=p, alpha_beta=(alpha, beta))
    assert len(set(rows_of(ranking))) == count
    assert {item.source for item in ranking.items} <= {"trending", "exploration"}
    for item in ranking.items:
        assert not PERSONAL_SIGNALS & set(item.signals)
        assert item.reason
    if exploration_rate == 0.0:
        assert not ranking.exploration_applied


# --- diversity ---------------------------------------------------------------------------


def mean_similarity(index: ItemIndex, rows: list[int]) -> float:
    v = index.vectors[rows].astype(np.float64)
    sims = v @ v.T
    n = len(rows)
    return float((sims.sum() - n) / (n * (n - 1)))


@pytest.mark.parametrize("count", [10, 20])
def test_diversity_spreads_the_slate(index: ItemIndex, count: int) -> None:
    c = candidates_for(index, profile(index))  # the user's nearest items lead
    alpha_beta = equal(len(c), 5.0, 60.0)
    user = user_model(index)
    plain = run(index, c, RankingOptions(count, 0.0, 0.0), user=user, alpha_beta=alpha_beta)
    diverse = run(index, c, RankingOptions(count, 0.0, 1.0), user=user, alpha_beta=alpha_beta)
    assert mean_similarity(index, rows_of(diverse)) < mean_similarity(index, rows_of(plain))
    categories = {int(index.category[r]) for r in rows_of(diverse)}
    assert len(categories) >= len({int(index.category[r]) for r in rows_of(plain)})
    # relevance-weighted: the best item keeps its place
    assert rows_of(diverse)[0] == rows_of(plain)[0]


def test_the_configured_diversity_applies_unless_the_request_says_otherwise(
    index: ItemIndex,
) -> None:
    c = candidates_for(index, profile(index))
    alpha_beta = equal(len(c), 5.0, 60.0)
    user = user_model(index)

    def rows(weight: float | None, configured: float) -> list[int]:
        rules = RankingRules(diversity_weight=configured)
        options = RankingOptions(15, 0.0, weight, rules=rules)
        return rows_of(run(index, c, options, user=user, alpha_beta=alpha_beta))

    assert rows(None, 1.0) == rows(1.0, 0.0)
    assert rows(0.0, 1.0) == rows(None, 0.0)
    assert rows(None, 1.0) != rows(None, 0.0)


# --- emotion rules -----------------------------------------------------------------------

EMOTIONS = [
    NEUTRAL,
    EmotionalState(sentiment=0.8, scroll_behavior=ScrollBehavior.DECIDING),
    EmotionalState(sentiment=-0.8, engagement_velocity=9.0, frustration=0.9),
    EmotionalState(
        engagement_velocity=9.0, frustration=0.9, scroll_behavior=ScrollBehavior.SEARCHING
    ),
]
EMOTION_IDS = ["neutral", "happy-decider", "unhappy-frustrated", "fast-frustrated-searcher"]


@pytest.mark.parametrize(
    ("emotion", "rule"),
    [
        (EmotionalState(scroll_behavior=ScrollBehavior.DECIDING), "deciding_clear_cta"),
        (EmotionalState(scroll_behavior=ScrollBehavior.DECIDING), "deciding_comparison"),
        (EmotionalState(sentiment=0.9, scroll_behavior=ScrollBehavior.SEARCHING),
         "positive_mood_aspirational"),
        (NEUTRAL, "browsing_novel_category"),
        (EmotionalState(engagement_velocity=9.0, scroll_behavior=ScrollBehavior.SEARCHING),
         "high_velocity_short"),
        (EmotionalState(sentiment=-0.9, scroll_behavior=ScrollBehavior.SEARCHING),
         "negative_mood_familiar"),
    ],
    ids=["deciding-cta", "deciding-comparison", "positive", "browsing", "fast", "negative"],
)  # fmt: skip
def test_emotion_rules_are_recorded_when_on(
    index: ItemIndex, emotion: EmotionalState, rule: str
) -> None:
    c = candidates_for(index, profile(index))
    on = run(index, c, RankingOptions(50, 0.0, rules=EMOTION_RULES_ON), emotion=emotion)
    assert any(rule in item.rules for item in on.items)
    if emotion.scroll_behavior == ScrollBehavior.SEARCHING:
        assert not any(r.startswith(("deciding", "browsing")) for i in on.items for r in i.rules)
    # off by default: no rule fires, none is recorded
    off = run(index, c, RankingOptions(50, 0.0), emotion=emotion)
    assert not any(EMOTION_RULES & set(item.rules) for item in off.items)


@pytest.mark.parametrize("emotion", EMOTIONS, ids=EMOTION_IDS)
def test_emotion_rules_shift_scores_by_a_bounded_amount(
    index: ItemIndex, emotion: EmotionalState
) -> None:
    c = candidates_for(index, profile(index))
    alpha, beta = posteriors(len(c), seed=2)
    options = RankingOptions(60, 0.0, rules=RankingRules(emotion=True, preselect=len(c)))
    ranking = run(index, c, options, emotion=emotion, alpha_beta=(alpha, beta))
    mean = dict(zip(c.rows.tolist(), ppf(alpha / (alpha + beta)).tolist(), strict=True))
    for item in ranking.items:
        shift = float(ppf(np.array([item.score]))[0]) - mean[item.row]
        assert abs(shift) <= EMOTION_BOUND + 1e-4
        assert shift == pytest.approx(emotion_shift(item.rules), abs=1e-4)


def test_emotion_rules_reorder_near_equals(index: ItemIndex) -> None:
    c = candidates_for(index, profile(index))
    deciding = EmotionalState(scroll_behavior=ScrollBehavior.DECIDING)
    ranking = run(
        index,
        c,
        RankingOptions(20, 0.0, rules=EMOTION_RULES_ON),
        emotion=deciding,
        alpha_beta=equal(len(c)),
    )
    # every item is equally good on its own: the ones a rule favours come first
    assert all(emotion_shift(item.rules) > 0 for item in ranking.items)
    assert all(index.in_stock[item.row] for item in ranking.items)


@pytest.mark.parametrize("emotion", EMOTIONS, ids=EMOTION_IDS)
def test_emotion_rules_never_bury_a_stated_preference(
    index: ItemIndex, emotion: EmotionalState
) -> None:
    c = candidates_for(index, profile(index))
    codes = index.category[c.rows]
    counts = np.bincount(codes)
    present = np.flatnonzero(counts)
    liked = int(present[np.argmin(counts[present])])  # the rarest category of the candidates
    liked_count = int(np.count_nonzero(codes == liked))
    assert 0 < liked_count < 20
    ranking = run(
        index,
        c,
        RankingOptions(20, 0.0, rules=EMOTION_RULES_ON),
        emotion=emotion,
        alpha_beta=equal(len(c)),
        preferences={liked: 1.0},
    )
    head = [int(index.category[r]) for r in rows_of(ranking)[:liked_count]]
    assert head == [liked] * liked_count
    for item in ranking.items:
        liked_item = int(index.category[item.row]) == liked
        assert (PREFERRED_RULE in item.rules) == liked_item
        assert AVOIDED_RULE not in item.rules


# --- what each item reports ---------------------------------------------------------------


@pytest.mark.parametrize("exploration_rate", [None, 0.0], ids=["default", "off"])
def test_sources_are_reported_per_item(index: ItemIndex, exploration_rate: float | None) -> None:
    p = profile(index)
    c = candidates_for(index, p, learned=tuple(range(0, 1_500, 7)))
    source_of = dict(zip(c.rows.tolist(), (Source(int(s)) for s in c.source), strict=True))
    ranking = run(index, c, RankingOptions(100, exploration_rate), p=p, user=user_model(index))
    reported = set()
    for item in ranking.items:
        source = source_of[item.row]
        expected = "exploration" if item.exploration else API_SOURCE[source]
        assert item.source == expected
        reported.add(source)
        if item.exploration:
            assert item.signals[0] == "exploration"
        elif source == Source.COLLABORATIVE:
            assert "category_match" in item.signals
        elif source == Source.CONTENT:
            assert "viewed_similar" in item.signals
        elif source == Source.FRESH:
            assert "new_arrival" in item.signals
    assert {Source.COLLABORATIVE, Source.CONTENT} <= reported
    assert len(reported) >= 4


@pytest.mark.parametrize(
    "filters",
    [
        Filters(categories=frozenset({"books"})),
        Filters(categories=frozenset({"books", "shoes"}), price_max=60.0),
        Filters(price_min=50.0, price_max=150.0),
        Filters(categories=frozenset({"garden"}), price_min=1000.0),  # nothing allowed
    ],
    ids=["category", "categories-and-price", "price-range", "none"],
)
def test_filters_hold_through_the_ranking(index: ItemIndex, filters: Filters) -> None:
    p = profile(index)
    c = candidates_for(index, p, filters=filters, learned=tuple(range(200)))
    ranking = run(index, c, RankingOptions(20), p=p, user=user_model(index))
    assert len(ranking.items) == min(20, len(c))
    for item in ranking.items:
        catalog_item = index.items[item.row]
        if filters.categories is not None:
            assert catalog_item.category in filters.categories
        if filters.price_min is not None:
            assert catalog_item.price >= filters.price_min
        if filters.price_max is not None:
            assert catalog_item.price <= filters.price_max
    if not index.mask(filters).any():
        assert ranking.items == []


@pytest.mark.parametrize("emotion", EMOTIONS, ids=EMOTION_IDS)
def test_shared_answers_carry_nothing_personal(index: ItemIndex, emotion: EmotionalState) -> None:
    p = profile(index, personal=False)
    c = candidates_for(index, p)
    assert set(c.source.tolist()) <= {Source.TRENDING, Source.FRESH, Source.RANDOM}
    options = RankingOptions(count=20, personal=False, rules=EMOTION_RULES_ON)
    ranking = run(index, c, options, p=p, emotion=emotion, user=user_model(index))
    for item in ranking.items:
        assert not PERSONAL_SIGNALS & set(item.signals)
        assert "you've" not in item.reason
        assert "users like you" not in item.reason
        assert not EMOTION_RULES & set(item.rules)  # the rules read the user's session


def test_the_shared_option_drops_personal_signals_of_a_personal_profile(index: ItemIndex) -> None:
    p = profile(index)
    c = candidates_for(index, p)
    personal = run(index, c, RankingOptions(count=30), p=p)
    shared = run(index, c, RankingOptions(count=30, personal=False), p=p)
    assert any(PERSONAL_SIGNALS & set(item.signals) for item in personal.items)
    for item in shared.items:
        assert not PERSONAL_SIGNALS & set(item.signals)


def test_price_match_is_within_the_ratio_of_the_usual_price(index: ItemIndex) -> None:
    usual = float(index.log_price[42])
    p = UserProfile(segment=None, device=None, local=LOCAL, price_preference=usual)
    c = cold_candidates(index)
    ranking = run(index, c, RankingOptions(100), p=p)
    matched = [
        abs(float(index.log_price[item.row]) - usual) <= math.log(PRICE_MATCH_RATIO)
        for item in ranking.items
    ]
    assert [("price_match" in item.signals) for item in ranking.items] == matched
    assert any(matched)
    assert not all(matched)
    # without a usual price nothing matches
    unknown = run(index, c, RankingOptions(100), p=replace(p, price_preference=None))
    assert not any("price_match" in item.signals for item in unknown.items)


@pytest.mark.parametrize(
    ("action", "duration_ms", "interested"),
    [
        ("click", None, True),
        ("add_to_cart", None, True),
        ("purchase", None, True),
        ("view", 15_000, True),
        ("view", 1_000, False),
        ("view", None, False),
        ("dismiss", None, False),
    ],
)
def test_previously_engaged_only_for_items_the_user_showed_interest_in(
    index: ItemIndex, action: str, duration_ms: int | None, interested: bool
) -> None:
    row = 33
    state = RankingHistory(
        interactions=(
            Interaction(
                "ix",
                index.items[row].item_id,
                action,
                NOW_MS - 60_000,
                index.items[row].category,
                duration_ms=duration_ms,
            ),
        )
    )
    p = profile_of(
        state,
        index,
        device=None,
        local=LOCAL,
        now_ms=NOW_MS,
        session_idle_ms=IDLE_MS,
        user_vector=None,
    )
    rows = [row, *range(100, 120)]
    alpha, beta = equal(len(rows))
    alpha[0] = 30.0  # the item itself is the best candidate
    ranking = run(index, trending(rows), RankingOptions(5, 0.0), p=p, alpha_beta=(alpha, beta))
    first = ranking.items[0]
    assert first.row == row
    assert ("previously_engaged" in first.signals) == interested
    assert (first.reason == "You showed interest in this recently") == interested


def test_traits_of_the_candidates(index: ItemIndex) -> None:
    by_category: dict[int, list[int]] = {}
    for r in range(len(index)):
        by_category.setdefault(int(index.category[r]), []).append(r)
    x, y, z, other = sorted(by_category)[:4]
    clicked, bounced, carted_long_ago = by_category[x][0], by_category[y][0], by_category[z][0]
    same_as_clicked, unrelated = by_category[x][1], by_category[other][0]

    def at(row: int, action: str, age_ms: int, duration_ms: int | None = None) -> Interaction:
        item = index.items[row]
        return Interaction(
            f"{row}", item.item_id, action, NOW_MS - age_ms, item.category, duration_ms
        )

    state = RankingHistory(
        interactions=(
            at(clicked, "click", 60_000),
            at(bounced, "view", 120_000, duration_ms=500),
            at(carted_long_ago, "add_to_cart", 3 * 3_600_000),  # an earlier session
        )
    )
    p = profile_of(
        state,
        index,
        device=None,
        local=LOCAL,
        now_ms=NOW_MS,
        session_idle_ms=IDLE_MS,
        user_vector=None,
    )
    rows = np.array([clicked, bounced, carted_long_ago, same_as_clicked, unrelated], np.intp)
    source = np.array([Source.TRENDING] * 4 + [Source.RANDOM], np.int8)
    confidence = np.array([0.1, 0.9, 0.5, 0.2, 0.3])
    traits = traits_of(index, Candidates(rows, source), p, confidence)
    assert traits.engaged_before.tolist() == [True, False, False, False, False]
    assert traits.familiar.tolist() == [True, False, True, True, False]
    assert traits.comparison.tolist() == [False, False, False, True, False]
    assert traits.novel_category.tolist() == [False, False, True, False, True]
    assert traits.exploration.tolist() == [False, False, False, False, True]
    assert traits.confidence is confidence
    aspirational = (
        (index.price_bucket[rows] == 4)
        | (index.popularity[rows] >= 0.9)
        | (index.freshness[rows] >= 0.7)
    )
    assert traits.aspirational.tolist() == aspirational.tolist()
    assert traits.short.tolist() == (index.content_length[rows] == 0).tolist()
    assert traits.long.tolist() == (index.content_length[rows] == 2).tolist()
    assert traits.clear_cta.tolist() == (index.in_stock[rows] & ~index.limited[rows]).tolist()
