"""Explicit category preferences: the change rules, the score shift, the stored form, and
what ranking does with them."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt
import pytest

from origin.catalog.item_index import Filters, ItemIndex
from origin.exceptions import TooManyPreferences
from origin.ranking.emotion import NEUTRAL, EmotionalState, ScrollBehavior
from origin.ranking.pipeline import (
    AVOIDED_RULE,
    PREFERRED_RULE,
    Ranking,
    RankingOptions,
    RankingRules,
    rank,
)
from origin.ranking.preferences import (
    CategoryChange,
    by_code,
    changed,
    decode,
    encode,
    listed,
)
from origin.ranking.profile import UserProfile
from origin.ranking.retrieval import Candidates, Source, retrieve
from protocol import keys
from protocol.api import CategoryPreference
from relevance.normal import ppf
from relevance.preferences import SHIFT_PER_STRENGTH, excluded
from tests.unit.catalogs import make_catalog


@pytest.mark.parametrize(
    ("current", "change", "cap", "expected"),
    [
        ({}, CategoryChange("a", "positive", 0.5), 50, {"a": 0.5}),
        ({}, CategoryChange("a", "negative", 0.5), 50, {"a": -0.5}),
        # The latest statement about a category replaces the earlier one, either way.
        ({"a": 0.5}, CategoryChange("a", "positive", 0.2), 50, {"a": 0.2}),
        ({"a": 0.5}, CategoryChange("a", "negative", 1.0), 50, {"a": -1.0}),
        ({"a": 0.5, "b": -0.3}, CategoryChange("c", "positive", 1.0), 50,
         {"a": 0.5, "b": -0.3, "c": 1.0}),
        # Strength 0 clears, whatever the direction; clearing nothing is no change.
        ({"a": 0.5, "b": 0.1}, CategoryChange("a", "negative", 0.0), 50, {"b": 0.1}),
        ({"b": 0.1}, CategoryChange("a", "positive", 0.0), 50, {"b": 0.1}),
        # At the cap an existing category can still change, and one can be cleared.
        ({"a": 0.5, "b": 0.1}, CategoryChange("b", "negative", 0.4), 2, {"a": 0.5, "b": -0.4}),
        ({"a": 0.5, "b": 0.1}, CategoryChange("b", "positive", 0.0), 2, {"a": 0.5}),
    ],
)  # fmt: skip
def test_a_change_replaces_the_category(
    current: dict[str, float], change: CategoryChange, cap: int, expected: dict[str, float]
) -> None:
    assert changed(current, change, cap) == expected
    assert changed(current, change, cap) is not current


@pytest.mark.parametrize(("held", "cap"), [(2, 2), (50, 50), (1, 1)])
def test_a_new_category_beyond_the_cap_is_refused(held: int, cap: int) -> None:
    current = {f"c{i}": 0.5 for i in range(held)}
    with pytest.raises(TooManyPreferences) as raised:
        changed(current, CategoryChange("new", "positive", 0.5), cap)
    assert (raised.value.category, raised.value.cap) == ("new", cap)
    assert str(cap) in str(raised.value)


@pytest.mark.parametrize(
    ("strengths", "hidden"),
    [
        ({}, set()),
        ({"a": -1.0}, {"a"}),
        ({"a": -0.99, "b": 1.0}, set()),
        ({"a": -1.0, "b": -1.0, "c": -0.5}, {"a", "b"}),
    ],
)
def test_only_a_full_strength_negative_preference_hides_a_category(
    strengths: dict[str, float], hidden: set[str]
) -> None:
    assert excluded(strengths) == hidden


def test_by_code_drops_categories_the_catalog_lost() -> None:
    codes = {"a": 0, "b": 1}
    assert by_code({"a": 0.5, "gone": -1.0, "b": -0.2}, codes.get) == {0: 0.5, 1: -0.2}


@pytest.mark.parametrize(
    "strengths",
    [{}, {"a": 0.5}, {"Home & Garden": -1.0, "toys:x": 0.1, "é": 1 / 3}],
)
def test_stored_form_round_trips(strengths: dict[str, float]) -> None:
    fields = {name.encode(): value.encode() for name, value in encode(strengths).items()}
    fields[b"fencing"] = b"7"
    fields[b"seen"] = b"9"
    assert decode(fields) == strengths


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({b"fencing": b"3", b"seen": b"3"}, {}),
        ({b"c:a": b"x", b"c:b": b"0.5"}, {"b": 0.5}),
        ({b"c:a": b"2.0", b"c:b": b"nan", b"c:c": b"0", b"c:d": b"-1"}, {"d": -1.0}),
        ({b"c:\xff": b"0.5"}, {}),
        ({"c:a": "0.25"}, {"a": 0.25}),
    ],
)
def test_damaged_fields_are_skipped(
    fields: dict[bytes | str, bytes | str], expected: dict[str, float]
) -> None:
    assert decode(fields) == expected


def test_listed_by_category_with_direction() -> None:
    assert listed({"b": -1.0, "a": 0.25}) == [
        CategoryPreference(category="a", direction="positive", strength=0.25),
        CategoryPreference(category="b", direction="negative", strength=1.0),
    ]


def test_preferences_share_the_users_slot() -> None:
    assert keys.user_preferences("u-1") == "u:{u-1}:pref"
    assert keys.user_preferences_resource("u-1") == "preferences:u-1"


# --- ranking ----------------------------------------------------------------------------

LOCAL = datetime(2025, 6, 11, 19, 30, tzinfo=UTC)
PROFILE = UserProfile(segment=None, device=None, local=LOCAL)
N = 200


@pytest.fixture(scope="module")
def index() -> ItemIndex:
    return make_catalog(600, 7, 16).index()


def rates() -> npt.NDArray[np.float64]:
    """Engagement rates falling from 9 % to 3 % down the candidates, well known."""
    return np.linspace(0.09, 0.03, N)


def ranked(
    index: ItemIndex,
    preferences: dict[int, float] | None,
    *,
    emotion: EmotionalState = NEUTRAL,
    rules: RankingRules | None = None,
    count: int = 40,
) -> Ranking:
    rows = np.arange(N, dtype=np.intp)
    candidates = Candidates(rows, np.full(N, Source.TRENDING, np.int8))
    evidence = 1_000.0
    return rank(
        index,
        candidates,
        profile=PROFILE,
        emotion=emotion,
        user=None,
        alpha=rates() * evidence,
        beta=(1 - rates()) * evidence,
        rng=np.random.default_rng(0),
        options=RankingOptions(count, 0.0, 0.0, rules=rules or RankingRules()),
        preferences=preferences,
    )


def share(index: ItemIndex, ranking: Ranking, code: int) -> int:
    return sum(int(index.category[i.row]) == code for i in ranking.items)


def test_ranking_lifts_a_liked_category_and_sinks_a_disliked_one(index: ItemIndex) -> None:
    plain = ranked(index, None)
    assert plain == ranked(index, {})
    liked, disliked = 1, int(index.category[plain.items[0].row])
    assert liked != disliked
    shifted = ranked(index, {liked: 1.0, disliked: -0.9})
    assert share(index, shifted, liked) > share(index, plain, liked)
    assert share(index, shifted, disliked) < share(index, plain, disliked)
    for item in shifted.items:
        code = int(index.category[item.row])
        assert (PREFERRED_RULE in item.rules) == (code == liked)
        assert (AVOIDED_RULE in item.rules) == (code == disliked)
    assert all(PREFERRED_RULE not in i.rules and AVOIDED_RULE not in i.rules for i in plain.items)


@pytest.mark.parametrize("strength", [1.0, 0.5, 0.1, -0.3, -0.9])
def test_a_preference_shifts_the_probit_score_by_its_scaled_strength(
    index: ItemIndex, strength: float
) -> None:
    code = int(index.category[0])
    ranking = ranked(index, {code: strength}, count=N)
    mean = ppf(rates())
    for item in ranking.items:
        expected = strength * SHIFT_PER_STRENGTH if index.category[item.row] == code else 0.0
        shift = float(ppf(np.array([item.score]))[0]) - float(mean[item.row])
        assert shift == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize(
    "emotion",
    [
        EmotionalState(scroll_behavior=ScrollBehavior.DECIDING),
        EmotionalState(sentiment=0.9, engagement_velocity=9.0, frustration=0.9),
        EmotionalState(engagement_velocity=9.0, scroll_behavior=ScrollBehavior.SEARCHING),
    ],
    ids=["deciding", "happy-fast-frustrated", "fast-searcher"],
)
def test_emotion_rules_are_not_reported_as_preferences(
    index: ItemIndex, emotion: EmotionalState
) -> None:
    """The rules shift scores too, up and down; only a stated preference is named one."""
    rules = RankingRules(emotion=True)
    without = ranked(index, None, emotion=emotion, rules=rules)
    assert any(item.rules for item in without.items)  # the emotion rules fired
    assert not any({PREFERRED_RULE, AVOIDED_RULE} & set(i.rules) for i in without.items)
    # a mild preference keeps its sign whatever the rules add
    liked, disliked = 1, 2
    stated = ranked(index, {liked: 0.1, disliked: -0.1}, emotion=emotion, rules=rules, count=N)
    for item in stated.items:
        code = int(index.category[item.row])
        assert (PREFERRED_RULE in item.rules) == (code == liked)
        assert (AVOIDED_RULE in item.rules) == (code == disliked)


@pytest.mark.parametrize("hidden", [{"books": -1.0}, {"books": -1.0, "shoes": -1.0}])
def test_a_full_strength_negative_hides_its_category_from_retrieval(
    index: ItemIndex, hidden: dict[str, float]
) -> None:
    """As ``/v1/personalize`` does: hidden categories leave the request's mask."""
    strengths = {**hidden, "garden": -0.9}
    gone = excluded(strengths)
    assert gone == set(hidden)
    codes = [c for c in (index.category_code(name) for name in gone) if c is not None]
    mask = index.mask(Filters()) & ~np.isin(index.category, codes)
    candidates = retrieve(
        index, mask, 300, np.random.default_rng(0), user_vector=None, session_vector=None
    )
    n = len(candidates)
    ranking = rank(
        index,
        candidates,
        profile=PROFILE,
        emotion=NEUTRAL,
        user=None,
        alpha=np.full(n, 3.0),
        beta=np.full(n, 60.0),
        rng=np.random.default_rng(0),
        options=RankingOptions(100),
        preferences=by_code(strengths, index.category_code),
    )
    assert len(ranking.items) == 100
    shown = {index.items[item.row].category for item in ranking.items}
    assert not shown & gone
    assert "garden" in {index.items[int(r)].category for r in candidates.rows}
