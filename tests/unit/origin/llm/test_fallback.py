from __future__ import annotations

import itertools

import pytest

from origin.llm.fallback import (
    HEADLINE_ORDER,
    PERSONAL_SIGNALS,
    TEMPLATE,
    WORDING,
    explain,
    usable_signals,
    weights,
)
from origin.llm.model import STYLES, ItemSummary, Style
from origin.ranking import explanations
from origin.ranking.explanations import Evidence, signals_of

ITEM = ItemSummary("i-1", "Zephyr Earbuds", "electronics", "Electronics", "Acme", 129.0, 0.85, 0.2)
ALL_SIGNALS = list(WORDING)
HISTORY = ("you've viewed", "your interest", "you showed", "your typical", "your usual")


def test_signals_are_those_of_origin_explanations() -> None:
    assert PERSONAL_SIGNALS == explanations._PERSONAL
    assert set(WORDING) == set(HEADLINE_ORDER)
    produced: set[str] = set()
    for flags in itertools.product([False, True], repeat=5):
        for source in ("collaborative", "content", "trending", "fresh"):
            evidence = Evidence(source, flags[0], "Shoes", 0.95 if flags[1] else 0.1,
                                0.9 if flags[2] else 0.1, flags[3], flags[4], flags[3])  # fmt: skip
            produced.update(signals_of(evidence, personal=True))
    assert produced == set(WORDING)


@pytest.mark.parametrize(
    ("signal", "personal_reason", "shared_reason"),
    [
        ("viewed_similar", "Similar to items you've viewed", None),
        ("category_match", "Matches your interest in Electronics", None),
        ("previously_engaged", "You showed interest in this recently", None),
        ("price_match", "Within your typical price range", None),
        ("trending", "Popular among users like you", "Popular in Electronics right now"),
        ("new_arrival", "New in Electronics", "New in Electronics"),
        ("exploration", "Something new for you to discover in Electronics",
         "Something new for you to discover in Electronics"),
    ],
)  # fmt: skip
def test_one_factor_per_signal(
    signal: str, personal_reason: str, shared_reason: str | None
) -> None:
    for style in STYLES:
        mine = explain(ITEM, [signal], style, personal=True)
        assert mine.factors[0].name == signal
        assert mine.factors[0].description == personal_reason
        assert mine.factors[0].weight == 1.0
        shared = explain(ITEM, [signal], style, personal=False)
        if shared_reason is None:  # a personal signal: the shared answer falls back to trending
            assert [f.name for f in shared.factors] == ["trending"]
        else:
            assert shared.factors[0].description == shared_reason


@pytest.mark.parametrize(
    ("signals", "style", "headline", "detailed"),
    [
        (["category_match"], "concise",
         "Recommended because you've shown interest in Electronics",
         "Recommended because you've shown interest in Electronics."),
        (["trending", "category_match"], "detailed",
         "Recommended because you've shown interest in Electronics",
         "Matches your interest in Electronics. Popular among users like you."),
        (["category_match", "trending"], "conversational",
         "We think you'll like this: it matches your interest in Electronics",
         "We picked this for you because it matches your interest in Electronics"
         " and it's popular with people like you."),
        (["viewed_similar", "category_match", "trending"], "concise",
         "Similar to items you've viewed", "Similar to items you've viewed."),
        (["viewed_similar", "category_match", "price_match", "trending"], "detailed",
         "Similar to items you've viewed",
         "Similar to items you've viewed. Matches your interest in Electronics."
         " Within your typical price range."),
        (["viewed_similar", "category_match", "trending"], "conversational",
         "We think you'll like this: it's similar to items you've viewed",
         "We picked this for you because it's similar to items you've viewed, it matches"
         " your interest in Electronics and it's popular with people like you."),
        (["exploration", "trending"], "concise",
         "Something new for you to discover in Electronics",
         "Something new for you to discover in Electronics."),
        (["trending", "new_arrival"], "detailed",
         "New in Electronics", "Popular among users like you. New in Electronics."),
        (["trending"], "conversational",
         "We think you'll like this: it's popular with people like you",
         "We picked this for you because it's popular with people like you."),
        ([], "concise", "Popular among users like you", "Popular among users like you."),
        (["unknown_signal"], "concise",
         "Popular among users like you", "Popular among users like you."),
    ],
)  # fmt: skip
def test_personal_wording(signals: list[str], style: Style, headline: str, detailed: str) -> None:
    explanation = explain(ITEM, signals, style, personal=True)
    assert (explanation.headline, explanation.detailed) == (headline, detailed)
    assert explanation.llm_generated is False
    assert explanation.model is None


@pytest.mark.parametrize(
    ("signals", "style", "headline", "detailed"),
    [
        (["category_match"], "concise",
         "Popular in Electronics right now", "Popular in Electronics right now."),
        (["viewed_similar", "trending", "new_arrival"], "detailed",
         "New in Electronics", "Popular in Electronics right now. New in Electronics."),
        (["exploration", "trending"], "conversational",
         "We think you'll like this: it's something new to discover in Electronics",
         "We picked this for you because it's something new to discover in Electronics"
         " and it's popular in Electronics right now."),
    ],
)  # fmt: skip
def test_shared_wording(signals: list[str], style: Style, headline: str, detailed: str) -> None:
    explanation = explain(ITEM, signals, style, personal=False)
    assert (explanation.headline, explanation.detailed) == (headline, detailed)


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize(
    "signals", [ALL_SIGNALS, ["category_match"], ["viewed_similar", "price_match"], []]
)
def test_shared_answers_never_speak_of_the_users_history_nor_the_item(
    signals: list[str], style: Style
) -> None:
    explanation = explain(ITEM, signals, style, personal=False)
    assert not {f.name for f in explanation.factors} & PERSONAL_SIGNALS
    texts = [explanation.headline, explanation.detailed]
    texts += [f.description for f in explanation.factors]
    for text in texts:
        assert not any(phrase in text for phrase in HISTORY), text
        assert ITEM.title not in text
        assert "like you" not in text


@pytest.mark.parametrize(
    ("signals", "expected"),
    [
        (["trending"], [("trending", 1.0)]),
        (["viewed_similar", "trending"], [("viewed_similar", 0.67), ("trending", 0.33)]),
        (["trending", "category_match"], [("category_match", 0.67), ("trending", 0.33)]),
        (
            ["viewed_similar", "category_match", "trending"],
            [("viewed_similar", 0.4), ("category_match", 0.4), ("trending", 0.2)],
        ),
        (
            ["exploration", "new_arrival", "trending"],  # equal shares: the first takes the cent
            [("exploration", 0.34), ("new_arrival", 0.33), ("trending", 0.33)],
        ),
        (
            ["previously_engaged", "price_match"],
            [("previously_engaged", 0.63), ("price_match", 0.37)],  # a tie: the first
        ),
    ],
)
def test_weights(signals: list[str], expected: list[tuple[str, float]]) -> None:
    assert weights(signals) == expected


@pytest.mark.parametrize("personal", [True, False])
@pytest.mark.parametrize("count", range(1, len(ALL_SIGNALS) + 1))
def test_weights_sum_to_one(count: int, personal: bool) -> None:
    for combination in itertools.combinations(ALL_SIGNALS, count):
        factors = explain(ITEM, list(combination), "detailed", personal=personal).factors
        assert sum(f.weight for f in factors) == pytest.approx(1.0)
        assert all(0.0 < f.weight <= 1.0 for f in factors)
        assert [f.weight for f in factors] == sorted((f.weight for f in factors), reverse=True)


@pytest.mark.parametrize(
    ("signals", "personal", "expected"),
    [
        (["trending", "trending"], True, ["trending"]),
        (["viewed_similar", "bogus", "trending"], True, ["viewed_similar", "trending"]),
        (["viewed_similar", "price_match"], False, ["trending"]),
        (["exploration", "category_match"], False, ["exploration"]),
        ([], False, ["trending"]),
    ],
)
def test_usable_signals(signals: list[str], personal: bool, expected: list[str]) -> None:
    assert usable_signals(signals, personal=personal) == expected


def test_the_seeds_template() -> None:
    assert TEMPLATE == "Recommended because you've shown interest in {category}"
