from __future__ import annotations

from dataclasses import replace

import pytest

from origin.ranking.explanations import Evidence, primary_reason, signals_of

PERSONAL_SIGNALS = {"viewed_similar", "category_match", "previously_engaged", "price_match"}

PLAIN = Evidence(
    source="trending",
    exploration=False,
    category_name="Shoes",
    popularity=0.5,
    freshness=0.1,
    category_affinity=False,
    engaged_before=False,
    price_match=False,
)


def evidence(**changes: object) -> Evidence:
    return replace(PLAIN, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ev", "personal_signals", "shared_signals"),
    [
        (evidence(), ["trending"], ["trending"]),
        (evidence(source="fresh"), ["new_arrival"], ["new_arrival"]),
        # shared: the personal signal goes, the default remains
        (evidence(source="content"), ["viewed_similar"], ["trending"]),
        (evidence(source="collaborative"), ["category_match"], ["trending"]),
        (
            evidence(source="collaborative", popularity=0.95),
            ["category_match", "trending"],
            ["trending"],
        ),
        (
            evidence(source="content", freshness=0.7),
            ["viewed_similar", "new_arrival"],
            ["new_arrival"],
        ),
        (evidence(source="content", freshness=0.69), ["viewed_similar"], ["trending"]),
        (evidence(source="content", popularity=0.9), ["viewed_similar", "trending"], ["trending"]),
        (evidence(category_affinity=True), ["category_match", "trending"], ["trending"]),
        (evidence(engaged_before=True), ["previously_engaged", "trending"], ["trending"]),
        (evidence(price_match=True), ["price_match", "trending"], ["trending"]),
        (evidence(exploration=True), ["exploration", "trending"], ["exploration", "trending"]),
        (
            evidence(
                source="collaborative",
                exploration=True,
                category_affinity=True,
                engaged_before=True,
                price_match=True,
                popularity=0.99,
                freshness=0.99,
            ),
            [
                "exploration",
                "category_match",
                "previously_engaged",
                "price_match",
                "trending",
                "new_arrival",
            ],
            ["exploration", "trending", "new_arrival"],
        ),
    ],
    ids=[
        "trending-source",
        "fresh-source",
        "content-source",
        "collaborative-source",
        "collaborative-popular",
        "content-new-at-0.7",
        "content-not-new-below-0.7",
        "content-trending-at-0.9",
        "category-affinity",
        "engaged-before",
        "price-match",
        "exploration",
        "everything",
    ],
)
def test_signals_of(ev: Evidence, personal_signals: list[str], shared_signals: list[str]) -> None:
    assert signals_of(ev, personal=True) == personal_signals
    shared = signals_of(ev, personal=False)
    assert shared == shared_signals
    assert not PERSONAL_SIGNALS & set(shared)
    assert shared  # never an empty explanation
    assert len(shared) == len(set(shared))


@pytest.mark.parametrize(
    ("ev", "personal", "expected"),
    [
        (evidence(engaged_before=True, source="content"), True,
         "You showed interest in this recently"),
        (evidence(source="content"), True, "Similar to items you've viewed"),
        (evidence(source="collaborative"), True,
         "Recommended because you've shown interest in Shoes"),
        (evidence(category_affinity=True), True,
         "Recommended because you've shown interest in Shoes"),
        (evidence(exploration=True), True, "Something new for you to discover in Shoes"),
        (evidence(source="fresh"), True, "New in Shoes"),
        (evidence(freshness=0.9), True, "Popular among users like you"),
        (evidence(), True, "Popular among users like you"),
        # shared answers: nothing about the user's history
        (evidence(engaged_before=True, source="content"), False, "Popular in Shoes right now"),
        (evidence(source="collaborative"), False, "Popular in Shoes right now"),
        (evidence(exploration=True, engaged_before=True), False,
         "Something new for you to discover in Shoes"),
        (evidence(source="fresh", price_match=True), False, "New in Shoes"),
        (evidence(), False, "Popular in Shoes right now"),
    ],
    ids=[
        "engaged-first",
        "viewed-similar",
        "collaborative",
        "affinity",
        "exploration",
        "fresh",
        "new-but-not-fresh-source",
        "default-personal",
        "shared-engaged",
        "shared-collaborative",
        "shared-exploration",
        "shared-fresh",
        "shared-default",
    ],
)  # fmt: skip
def test_primary_reason(ev: Evidence, personal: bool, expected: str) -> None:
    signals = signals_of(ev, personal=personal)
    assert primary_reason(ev, signals, personal=personal) == expected
