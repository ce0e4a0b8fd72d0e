from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from origin.ranking.emotion import NEUTRAL, EmotionalState, ScrollBehavior
from origin.ranking.rerank import (
    RULES,
    CandidateTraits,
    adjustments,
    diversify,
    fired_rules,
    max_per_category,
    rerank,
    rule_names,
)

FLAG_TRAITS = (
    "aspirational",
    "engaged_before",
    "familiar",
    "short",
    "long",
    "exploration",
    "clear_cta",
    "comparison",
    "novel_category",
)


def traits(n: int = 1, confidence: float = 0.5, **flags: bool) -> CandidateTraits:
    """``n`` identical candidates with the given traits set."""
    values = {name: np.full(n, flags.get(name, False)) for name in FLAG_TRAITS}
    return CandidateTraits(confidence=np.full(n, confidence), **values)


def every_trait(n: int = 1, confidence: float = 0.9) -> CandidateTraits:
    return traits(n, confidence, **dict.fromkeys(FLAG_TRAITS, True))


def fired_names(state: EmotionalState, t: CandidateTraits) -> list[str]:
    return rule_names(fired_rules(state, t)[0])


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (NEUTRAL, ["browsing_novel_category"]),  # neutral defaults to browsing
        (
            EmotionalState(sentiment=0.31, scroll_behavior=ScrollBehavior.SEARCHING),
            ["positive_mood_aspirational"],
        ),
        (EmotionalState(sentiment=0.3, scroll_behavior=ScrollBehavior.SEARCHING), []),
        (
            EmotionalState(sentiment=-0.31, scroll_behavior=ScrollBehavior.SEARCHING),
            ["negative_mood_engaged_before", "negative_mood_familiar"],
        ),
        (EmotionalState(sentiment=-0.3, scroll_behavior=ScrollBehavior.SEARCHING), []),
        (
            EmotionalState(engagement_velocity=5.01, scroll_behavior=ScrollBehavior.SEARCHING),
            ["high_velocity_short", "high_velocity_long"],
        ),
        (EmotionalState(engagement_velocity=5.0, scroll_behavior=ScrollBehavior.SEARCHING), []),
        (
            EmotionalState(frustration=0.51, scroll_behavior=ScrollBehavior.SEARCHING),
            ["frustrated_high_confidence", "frustrated_less_exploration"],
        ),
        (EmotionalState(frustration=0.5, scroll_behavior=ScrollBehavior.SEARCHING), []),
        (
            EmotionalState(scroll_behavior=ScrollBehavior.DECIDING),
            ["deciding_clear_cta", "deciding_comparison"],
        ),
        (EmotionalState(scroll_behavior=ScrollBehavior.SEARCHING), []),
        (
            EmotionalState(
                sentiment=0.9,
                engagement_velocity=9.0,
                frustration=0.9,
                scroll_behavior=ScrollBehavior.DECIDING,
            ),
            [
                "positive_mood_aspirational",
                "high_velocity_short",
                "high_velocity_long",
                "frustrated_high_confidence",
                "frustrated_less_exploration",
                "deciding_clear_cta",
                "deciding_comparison",
            ],
        ),
    ],
    ids=[
        "neutral-browsing",
        "positive-above-0.3",
        "positive-at-0.3-strict",
        "negative-below-minus-0.3",
        "negative-at-minus-0.3-strict",
        "velocity-above-5",
        "velocity-at-5-strict",
        "frustration-above-0.5",
        "frustration-at-0.5-strict",
        "deciding",
        "searching-fires-nothing",
        "everything-at-once",
    ],
)
def test_rules_fire_at_the_seed_thresholds(state: EmotionalState, expected: list[str]) -> None:
    # every trait true: what fires depends on the state alone
    assert fired_names(state, every_trait()) == expected


@pytest.mark.parametrize(
    ("state", "trait", "rule"),
    [
        (EmotionalState(sentiment=0.5), "aspirational", "positive_mood_aspirational"),
        (EmotionalState(sentiment=-0.5), "engaged_before", "negative_mood_engaged_before"),
        (EmotionalState(sentiment=-0.5), "familiar", "negative_mood_familiar"),
        (EmotionalState(engagement_velocity=6), "short", "high_velocity_short"),
        (EmotionalState(engagement_velocity=6), "long", "high_velocity_long"),
        (EmotionalState(frustration=0.6), "exploration", "frustrated_less_exploration"),
        (
            EmotionalState(scroll_behavior=ScrollBehavior.DECIDING),
            "clear_cta",
            "deciding_clear_cta",
        ),
        (
            EmotionalState(scroll_behavior=ScrollBehavior.DECIDING),
            "comparison",
            "deciding_comparison",
        ),
        (NEUTRAL, "novel_category", "browsing_novel_category"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_each_rule_needs_its_trait(state: EmotionalState, trait: str, rule: str) -> None:
    with_trait = traits(**{trait: True})
    without = traits()
    assert rule in fired_names(state, with_trait)
    assert rule not in fired_names(state, without)


@pytest.mark.parametrize(
    ("confidence", "fires"),
    [(0.8, False), (0.8001, True), (0.95, True), (0.5, False)],
    ids=["at-0.8-strict", "just-above", "high", "low"],
)
def test_frustrated_high_confidence_threshold(confidence: float, fires: bool) -> None:
    state = EmotionalState(frustration=0.9, scroll_behavior=ScrollBehavior.SEARCHING)
    names = fired_names(state, traits(confidence=confidence))
    assert ("frustrated_high_confidence" in names) is fires


FACTOR = {rule.name: rule.factor for rule in RULES}


@pytest.mark.parametrize(
    "names",
    [
        [],
        ["positive_mood_aspirational"],
        ["negative_mood_engaged_before", "negative_mood_familiar"],
        ["high_velocity_long", "frustrated_less_exploration"],
        ["frustrated_high_confidence", "deciding_clear_cta", "deciding_comparison"],
        [rule.name for rule in RULES],
    ],
    ids=["none", "single", "negative-pair", "two-penalties", "three-boosts", "all"],
)
def test_adjustment_is_the_product_of_fired_factors(names: list[str]) -> None:
    row = np.array([rule.name in names for rule in RULES])
    fired = np.stack([row, np.zeros(len(RULES), bool)])
    expected = math.prod(FACTOR[name] for name in names)
    assert adjustments(fired).tolist() == pytest.approx([expected, 1.0])
    assert rule_names(row) == [rule.name for rule in RULES if rule.name in names]


@pytest.mark.parametrize(
    ("name", "factor"),
    [
        ("positive_mood_aspirational", 1.1),
        ("negative_mood_engaged_before", 1.15),
        ("negative_mood_familiar", 1.1),
        ("high_velocity_short", 1.1),
        ("high_velocity_long", 0.9),
        ("frustrated_high_confidence", 1.2),
        ("frustrated_less_exploration", 0.7),
        ("deciding_clear_cta", 1.1),
        ("deciding_comparison", 1.15),
        ("browsing_novel_category", 1.1),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_seed_factors(name: str, factor: float) -> None:
    assert FACTOR[name] == factor


def test_rerank_orders_by_adjusted_score_stably() -> None:
    state = EmotionalState(scroll_behavior=ScrollBehavior.DECIDING)
    t = replace(
        traits(5),
        clear_cta=np.array([False, False, True, False, False]),
    )
    scores = np.array([0.5, 0.6, 0.5, 0.5, 0.6])
    order, adjusted, fired = rerank(scores, state, t)
    # 0.5 * 1.1 = 0.55 stays below 0.6; the ties keep their input order
    assert order.tolist() == [1, 4, 2, 0, 3]
    assert adjusted.tolist() == pytest.approx([0.5, 0.6, 0.55, 0.5, 0.6])
    assert rule_names(fired[2]) == ["deciding_clear_cta"]
    assert order.dtype == np.intp


def test_rerank_penalty_can_reorder() -> None:
    state = EmotionalState(frustration=0.9, scroll_behavior=ScrollBehavior.SEARCHING)
    t = replace(traits(2), exploration=np.array([True, False]))
    order, adjusted, _ = rerank(np.array([0.9, 0.7]), state, t)
    assert order.tolist() == [1, 0]  # 0.9 * 0.7 = 0.63 < 0.7
    assert adjusted[0] == pytest.approx(0.63)


@pytest.mark.parametrize(
    ("shown", "min_diversity", "expected"),
    [
        (10, 0.3, 7),
        (20, 0.3, 14),
        (3, 0.3, 2),
        (1, 0.3, 1),
        (0, 0.3, 1),
        (10, 0.0, 10),
        (10, 1.0, 1),
        (10, 0.8, 2),  # exactly 2: floating point must not round it down to 1
        (20, 0.9, 2),
        (30, 0.8, 6),
        (10, 0.95, 1),
    ],
    ids=[
        "10-0.3",
        "20-0.3",
        "3-0.3",
        "1-0.3",
        "0-shown",
        "d-0",
        "d-1",
        "10-0.8",
        "20-0.9",
        "30-0.8",
        "10-0.95",
    ],
)
def test_max_per_category(shown: int, min_diversity: float, expected: int) -> None:
    assert max_per_category(shown, min_diversity) == expected


@pytest.mark.parametrize(
    ("categories", "shown", "min_diversity", "expected_order", "expected_deferred"),
    [
        # cap 7 of 10: the 8th and 9th "A" wait behind the first 10 chosen
        (
            "AAAAAAAAABBBBB",
            10,
            0.3,
            [0, 1, 2, 3, 4, 5, 6, 9, 10, 11, 7, 8, 12, 13],
            [7, 8],
        ),
        # already diverse enough: untouched
        ("ABABABAB", 4, 0.3, [0, 1, 2, 3, 4, 5, 6, 7], []),
        # d=0: no constraint
        ("AAAAAB", 4, 0.0, [0, 1, 2, 3, 4, 5], []),
        # d=1: one per category, the rest deferred in their order
        ("AABBCA", 4, 1.0, [0, 2, 4, 1, 3, 5], [1, 3, 5]),
        # a single category: the window holds cap items, then the deferred in order
        ("AAAAA", 4, 0.5, [0, 1, 2, 3, 4], [2, 3, 4]),
        # fewer candidates than shown: cap from the window, nothing deferred here
        ("AAAB", 10, 0.3, [0, 1, 2, 3], []),
        # fewer candidates than shown but over the cap
        ("AAAAAAAAB", 10, 0.3, [0, 1, 2, 3, 4, 5, 6, 8, 7], [7]),
    ],
    ids=[
        "cap-7-of-10",
        "already-diverse",
        "d-0",
        "d-1",
        "single-category",
        "fewer-than-shown",
        "fewer-than-shown-over-cap",
    ],
)
def test_diversify(
    categories: str,
    shown: int,
    min_diversity: float,
    expected_order: list[int],
    expected_deferred: list[int],
) -> None:
    category = np.array([ord(c) - ord("A") for c in categories], np.int32)
    order = np.arange(len(categories), dtype=np.intp)
    new_order, deferred = diversify(order, category, shown, min_diversity)
    assert new_order.tolist() == expected_order
    assert deferred.tolist() == expected_deferred
    assert new_order.dtype == np.intp


@pytest.mark.parametrize("min_diversity", [0.0, 0.3, 0.5, 0.8, 1.0])
@pytest.mark.parametrize("shown", [1, 5, 10, 20])
def test_diversify_caps_the_window_and_keeps_everything(shown: int, min_diversity: float) -> None:
    rng = np.random.default_rng(shown)
    n = 60
    category = rng.choice(4, size=n, p=[0.7, 0.1, 0.1, 0.1]).astype(np.int32)
    order = rng.permutation(n).astype(np.intp)
    new_order, deferred = diversify(order, category, shown, min_diversity)
    assert sorted(new_order.tolist()) == list(range(n))
    cap = max_per_category(shown, min_diversity)
    window = category[new_order[:shown]]
    chosen = [c for c in new_order[:shown].tolist() if c not in set(deferred.tolist())]
    assert np.bincount(category[chosen], minlength=4).max() <= cap
    if deferred.size == 0:
        assert new_order.tolist() == order.tolist()
    # deferred candidates keep their relative order
    positions = {c: p for p, c in enumerate(order.tolist())}
    assert [positions[c] for c in deferred.tolist()] == sorted(positions[c] for c in deferred)
    # a deferred candidate is shown only when no other candidate could take its place
    if len(chosen) < shown:
        assert new_order.size == len(chosen) + deferred.size
    else:
        assert np.bincount(window, minlength=4).max() <= cap
