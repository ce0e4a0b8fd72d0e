"""Explicit category preferences: the change rules, the score shift, the stored form, and
what ranking does with them."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from origin.bandit import BanditConfig, Posteriors
from origin.context_features import FEATURES, profile_of
from origin.emotion import NEUTRAL
from origin.exceptions import TooManyPreferences
from origin.item_index import ItemIndex
from origin.preferences import (
    SCORE_WEIGHT,
    CategoryChange,
    by_code,
    changed,
    decode,
    encode,
    excluded,
    listed,
    score_shift,
)
from origin.ranking import AVOIDED_RULE, PREFERRED_RULE, Ranking, RankingOptions, rank
from origin.retrieval import Candidates, Source
from origin.user_state import UserState
from protocol import keys
from protocol.api import CategoryPreference, Device
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


@pytest.mark.parametrize(
    ("category", "strengths", "expected"),
    [
        ([0, 1, 2], {}, [0.0, 0.0, 0.0]),
        ([0, 1, 2], {1: 1.0}, [0.0, SCORE_WEIGHT, 0.0]),
        ([0, 1, 1, 2], {1: -0.5, 2: 0.25}, [0.0, -0.5 * SCORE_WEIGHT, -0.5 * SCORE_WEIGHT,
                                            0.25 * SCORE_WEIGHT]),
        ([3, 3], {7: 1.0}, [0.0, 0.0]),
        ([], {1: 1.0}, []),
    ],
)  # fmt: skip
def test_score_shift_is_strength_times_the_weight(
    category: list[int], strengths: dict[int, float], expected: list[float]
) -> None:
    shift = score_shift(np.array(category, np.int32), strengths)
    assert shift.tolist() == pytest.approx(expected)


def test_score_shift_takes_another_weight() -> None:
    assert score_shift(np.array([1]), {1: -0.5}, 0.4).tolist() == pytest.approx([-0.2])


def test_by_code_drops_categories_the_catalog_lost() -> None:
    codes = {"a": 0, "b": 1}
    assert by_code({"a": 0.5, "gone": -1.0, "b": -0.2}, codes.get) == {0: 0.5, 1: -0.2}


@pytest.mark.parametrize(
    "strengths",
    [{}, {"a": 0.5}, {"Home & Garden": -1.0, "toys:x": 0.1, "é": 1 / 3}],
)
def test_stored_form_round_trips(strengths: dict[str, float]) -> None:
    flat = encode(strengths)
    fields = {flat[i].encode(): flat[i + 1].encode() for i in range(0, len(flat), 2)}
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
NOW_MS = int(LOCAL.timestamp() * 1000)


@pytest.fixture(scope="module")
def index() -> ItemIndex:
    return make_catalog(600, 7, 16).index()


def ranked(index: ItemIndex, preferences: dict[int, float] | None) -> Ranking:
    rows = np.arange(200, dtype=np.intp)
    n = rows.size
    candidates = Candidates(
        rows=rows,
        source=np.full(n, Source.TRENDING, np.int8),
        base=np.linspace(0.9, 0.5, n),
        similarity=np.full(n, 0.5),
    )
    profile = profile_of(
        UserState(),
        index,
        device=Device.DESKTOP,
        local=LOCAL,
        now_ms=NOW_MS,
        session_idle_ms=1_800_000,
        user_vector=None,
    )
    return rank(
        index,
        candidates,
        profile=profile,
        emotion=NEUTRAL,
        posteriors=Posteriors.prior(n, BanditConfig()),
        context_weights=np.zeros(FEATURES, np.float32),
        rng=np.random.default_rng(0),
        config=BanditConfig(),
        options=RankingOptions(count=40, exploration_rate=0.0, diversity_weight=0.0),
        now_ms=NOW_MS,
        preferences=preferences,
    )


def test_ranking_lifts_a_liked_category_and_sinks_a_disliked_one(index: ItemIndex) -> None:
    plain = ranked(index, None)
    assert plain == ranked(index, {})
    liked, disliked = 1, int(index.category[plain.items[0].row])
    assert liked != disliked
    shifted = ranked(index, {liked: 1.0, disliked: -0.9})

    def share(ranking: Ranking, code: int) -> int:
        return sum(int(index.category[i.row]) == code for i in ranking.items)

    assert share(shifted, liked) > share(plain, liked)
    assert share(shifted, disliked) < share(plain, disliked)
    for item in shifted.items:
        code = int(index.category[item.row])
        assert (PREFERRED_RULE in item.rules) == (code == liked)
        assert (AVOIDED_RULE in item.rules) == (code == disliked)
    assert all(PREFERRED_RULE not in i.rules and AVOIDED_RULE not in i.rules for i in plain.items)
