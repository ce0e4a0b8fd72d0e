from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime

import numpy as np
import pytest

from origin.bandit import BanditConfig, Posteriors
from origin.context_features import FEATURES, UserProfile, profile_of
from origin.emotion import NEUTRAL, EmotionalState, ScrollBehavior
from origin.item_index import Filters, ItemIndex
from origin.ranking import FLOOR_RULE, Ranking, RankingOptions, rank
from origin.rerank import DIVERSITY_RULE, RULES, max_per_category
from origin.retrieval import Candidates, Source, retrieve
from origin.user_state import Interaction, UserState
from protocol.api import Device
from tests.unit.catalogs import make_catalog

CONFIG = BanditConfig()
LOCAL = datetime(2025, 6, 11, 19, 30, tzinfo=UTC)
NOW_MS = int(LOCAL.timestamp() * 1000)
IDLE_MS = 30 * 60_000
PERSONAL_SIGNALS = {"viewed_similar", "category_match", "previously_engaged", "price_match"}
RULE_NAMES = {rule.name for rule in RULES} | {DIVERSITY_RULE, FLOOR_RULE}


@pytest.fixture(scope="module")
def index() -> ItemIndex:
    return make_catalog(1_500, 21, 16).index()


def user_state(index: ItemIndex) -> UserState:
    rows = (10, 11, 12, 13, 14)
    actions = ("click", "view", "add_to_cart", "dismiss", "click")
    interactions = tuple(
        Interaction(
            f"ix-{k}",
            index.items[row].item_id,
            action,
            NOW_MS - 60_000 * (k + 1),
            index.items[row].category,
            duration_ms=15_000 if action == "view" else None,
        )
        for k, (row, action) in enumerate(zip(rows, actions, strict=True))
    )
    return UserState(interactions=interactions)


def personal_profile(index: ItemIndex) -> UserProfile:
    return profile_of(
        user_state(index),
        index,
        device=Device.MOBILE,
        local=LOCAL,
        now_ms=NOW_MS,
        session_idle_ms=IDLE_MS,
        user_vector=index.vectors[10].copy(),
    )


def shared_profile(index: ItemIndex) -> UserProfile:
    return profile_of(
        user_state(index),
        index,
        device=Device.MOBILE,
        local=LOCAL,
        now_ms=NOW_MS,
        session_idle_ms=IDLE_MS,
        user_vector=index.vectors[10].copy(),
        personal=False,
    )


def candidates_for(index: ItemIndex, profile: UserProfile, budget: int = 300) -> Candidates:
    return retrieve(
        index,
        index.mask(Filters()),
        budget,
        user_vector=profile.user_vector,
        session_vector=profile.session_vector,
    )


def run(
    index: ItemIndex,
    candidates: Candidates,
    options: RankingOptions,
    *,
    profile: UserProfile | None = None,
    emotion: EmotionalState = NEUTRAL,
    posteriors: Posteriors | None = None,
    seed: int = 0,
) -> Ranking:
    n = len(candidates)
    return rank(
        index,
        candidates,
        profile=profile if profile is not None else personal_profile(index),
        emotion=emotion,
        posteriors=posteriors if posteriors is not None else Posteriors.prior(n, CONFIG),
        context_weights=np.zeros(FEATURES, np.float32),
        rng=np.random.default_rng(seed),
        config=CONFIG,
        options=options,
        now_ms=NOW_MS,
    )


def flat(index: ItemIndex, rows: np.ndarray, base: float) -> Candidates:
    """Candidates with one base score: with base 1 a Thompson draw never beats it, so
    nothing explores unless the floor forces it."""
    n = rows.size
    return Candidates(
        rows=rows.astype(np.intp),
        source=np.full(n, Source.TRENDING, np.int8),
        base=np.full(n, base),
        similarity=np.full(n, 0.5),
    )


def test_empty_candidates(index: ItemIndex) -> None:
    ranking = run(index, flat(index, np.empty(0, np.intp), 0.5), RankingOptions(count=10))
    assert ranking.items == []
    assert not ranking.exploration_applied


@pytest.mark.parametrize("count", [1, 5, 10, 20, 50])
@pytest.mark.parametrize(
    "exploration_rate", [None, 0.0, 0.3, 1.0], ids=["default", "off", "seed", "full"]
)
@pytest.mark.parametrize("diversity", [None, 0.0, 0.8, 1.0], ids=["d-default", "d0", "d08", "d1"])
def test_count_and_no_duplicates(
    index: ItemIndex, count: int, exploration_rate: float | None, diversity: float | None
) -> None:
    profile = personal_profile(index)
    c = candidates_for(index, profile)
    options = RankingOptions(count, exploration_rate, diversity)
    ranking = run(index, c, options, profile=profile, seed=count)
    rows = [item.row for item in ranking.items]
    assert len(rows) == count
    assert len(set(rows)) == count
    assert set(rows) <= set(c.rows.tolist())
    for item in ranking.items:
        assert set(item.rules) <= RULE_NAMES
        assert item.signals
        assert item.reason
        assert item.exploration == (item.source == "exploration")
        assert 0 < item.uncertainty <= 1


def test_fewer_candidates_than_count(index: ItemIndex) -> None:
    c = flat(index, np.arange(4), 0.5)
    ranking = run(index, c, RankingOptions(count=10))
    assert sorted(item.row for item in ranking.items) == [0, 1, 2, 3]


def test_same_seed_same_ranking(index: ItemIndex) -> None:
    c = candidates_for(index, personal_profile(index))
    a = run(index, c, RankingOptions(count=20), seed=5)
    b = run(index, c, RankingOptions(count=20), seed=5)
    assert a == b


@pytest.mark.parametrize("count", [5, 20, 50])
def test_exploration_rate_zero_turns_exploration_off(index: ItemIndex, count: int) -> None:
    # base 0 everywhere: every Thompson draw beats it, yet nothing may be marked
    c = flat(index, np.arange(200), 0.0)
    ranking = run(index, c, RankingOptions(count, exploration_rate=0.0))
    assert not ranking.exploration_applied
    for item in ranking.items:
        assert not item.exploration
        assert item.source != "exploration"
        assert FLOOR_RULE not in item.rules
        assert "exploration" not in item.signals


@pytest.mark.parametrize(
    ("n", "count", "exploration_rate"),
    [
        (200, 5, 0.3),
        (200, 20, 0.3),
        (200, 40, 0.3),
        (200, 60, 0.05),
        (41, 40, 0.3),  # one candidate below the window, two explorers wanted
        (30, 20, 1.0),
    ],
    ids=["count-5", "count-20", "count-40", "count-60", "short-tail", "eps-1"],
)
def test_exploration_floor(index: ItemIndex, n: int, count: int, exploration_rate: float) -> None:
    c = flat(index, np.arange(n), 1.0)  # nothing explores by itself
    ranking = run(index, c, RankingOptions(count, exploration_rate))
    rows = [item.row for item in ranking.items]
    assert len(set(rows)) == len(rows) == count
    explorers = [item for item in ranking.items if item.exploration]
    wanted = min(math.ceil(CONFIG.min_exploration * count), n - count)
    assert len(explorers) >= wanted
    for item in explorers:
        assert FLOOR_RULE in item.rules
        assert item.source == "exploration"
        assert "exploration" in item.signals


def test_natural_exploration_is_not_forced(index: ItemIndex) -> None:
    c = flat(index, np.arange(100), 0.0)  # every draw beats 0
    ranking = run(index, c, RankingOptions(10, exploration_rate=0.3))
    assert all(item.exploration for item in ranking.items)
    assert not any(FLOOR_RULE in item.rules for item in ranking.items)


@pytest.mark.parametrize("count", [5, 10, 20])
@pytest.mark.parametrize("diversity", [None, 0.3, 0.5, 0.8, 1.0])
@pytest.mark.parametrize("exploration_rate", [0.0, 0.3], ids=["no-floor", "floor"])
def test_diversity_cap_in_the_window(
    index: ItemIndex, count: int, diversity: float | None, exploration_rate: float
) -> None:
    profile = personal_profile(index)
    c = candidates_for(index, profile)  # the user's nearest items: one category dominates
    ranking = run(index, c, RankingOptions(count, exploration_rate, diversity), profile=profile)
    cap = max_per_category(count, 0.3 if diversity is None else diversity)
    chosen = Counter(
        index.items[item.row].category
        for item in ranking.items
        if DIVERSITY_RULE not in item.rules and FLOOR_RULE not in item.rules
    )
    assert max(chosen.values()) <= cap
    if len(set(index.category[c.rows].tolist())) * cap >= count and exploration_rate == 0:
        # enough categories to fill the window within the cap
        shown = Counter(index.items[item.row].category for item in ranking.items)
        assert max(shown.values()) <= cap


def mixed_categories(index: ItemIndex) -> np.ndarray:
    """30 candidates of one category, then 3 of another."""
    a = np.flatnonzero(index.category == 0)[:30]
    b = np.flatnonzero(index.category == 1)[:3]
    return np.concatenate([a, b])


def test_floor_keeps_the_diversity_cap(index: ItemIndex) -> None:
    c = flat(index, mixed_categories(index), 1.0)
    ranking = run(index, c, RankingOptions(count=10, exploration_rate=0.3, diversity_weight=0.3))
    shown = Counter(int(index.category[item.row]) for item in ranking.items)
    assert any(item.exploration for item in ranking.items)
    assert max(shown.values()) <= max_per_category(10, 0.3)


@pytest.mark.parametrize(
    "emotion",
    [
        NEUTRAL,
        EmotionalState(sentiment=0.8, scroll_behavior=ScrollBehavior.DECIDING),
        EmotionalState(sentiment=-0.8, engagement_velocity=9.0, frustration=0.9),
    ],
    ids=["neutral", "happy-decider", "unhappy-frustrated"],
)
def test_shared_answers_carry_no_personal_signals(
    index: ItemIndex, emotion: EmotionalState
) -> None:
    profile = shared_profile(index)
    c = candidates_for(index, profile)
    assert set(c.source.tolist()) <= {Source.TRENDING, Source.FRESH}
    options = RankingOptions(count=20, personal=False)
    ranking = run(index, c, options, profile=profile, emotion=emotion)
    for item in ranking.items:
        assert not PERSONAL_SIGNALS & set(item.signals)
        assert "you've" not in item.reason
        assert "users like you" not in item.reason
        assert "negative_mood_engaged_before" not in item.rules
        assert "deciding_comparison" not in item.rules


def test_shared_option_filters_signals_even_with_a_personal_profile(index: ItemIndex) -> None:
    profile = personal_profile(index)
    c = candidates_for(index, profile)
    personal = run(index, c, RankingOptions(count=30), profile=profile)
    shared = run(index, c, RankingOptions(count=30, personal=False), profile=profile)
    assert any(PERSONAL_SIGNALS & set(item.signals) for item in personal.items)
    for item in shared.items:
        assert not PERSONAL_SIGNALS & set(item.signals)


@pytest.mark.parametrize(
    ("emotion", "rule"),
    [
        (EmotionalState(scroll_behavior=ScrollBehavior.DECIDING), "deciding_clear_cta"),
        (EmotionalState(sentiment=0.9, scroll_behavior=ScrollBehavior.SEARCHING),
         "positive_mood_aspirational"),
        (NEUTRAL, "browsing_novel_category"),
        (EmotionalState(engagement_velocity=9.0, scroll_behavior=ScrollBehavior.SEARCHING),
         "high_velocity_short"),
    ],
    ids=["deciding", "positive", "browsing", "fast"],
)  # fmt: skip
def test_rules_are_recorded(index: ItemIndex, emotion: EmotionalState, rule: str) -> None:
    c = candidates_for(index, personal_profile(index))
    ranking = run(index, c, RankingOptions(count=50, exploration_rate=0.0), emotion=emotion)
    assert any(rule in item.rules for item in ranking.items)
    if emotion.scroll_behavior == ScrollBehavior.SEARCHING:
        assert not any(
            r.startswith(("deciding", "browsing")) for i in ranking.items for r in i.rules
        )


def test_deferred_items_record_the_diversity_rule(index: ItemIndex) -> None:
    # one category only: the window holds the cap, then the deferred ones
    rows = np.flatnonzero(index.category == 0)[:20]
    c = flat(index, rows, 0.5)
    ranking = run(index, c, RankingOptions(count=10, exploration_rate=0.0, diversity_weight=0.5))
    deferred = [item for item in ranking.items if DIVERSITY_RULE in item.rules]
    assert len(deferred) == 10 - max_per_category(10, 0.5)
    assert all(DIVERSITY_RULE in item.rules for item in ranking.items[-len(deferred) :])
