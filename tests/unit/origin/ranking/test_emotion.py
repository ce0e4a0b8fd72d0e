from __future__ import annotations

import pytest

from origin.ranking.emotion import (
    EmotionalState,
    ScrollBehavior,
    emotional_state,
    engagement_velocity,
    frustration,
    is_bounce,
    is_positive,
    scroll_behavior,
    sentiment,
    valence,
)
from origin.ranking.history import Interaction
from protocol.api import PageType

NOW = 1_700_000_000_000


def ix(
    action: str,
    *,
    age_ms: int = 0,
    duration_ms: int | None = None,
    category: str | None = None,
    n: int = 0,
) -> Interaction:
    return Interaction(
        interaction_id=f"x{n}-{action}-{age_ms}",
        item_id=f"it-{n}",
        action=action,
        timestamp_ms=NOW - age_ms,
        category=category,
        duration_ms=duration_ms,
    )


def session(*actions: str) -> list[Interaction]:
    """Newest first, one second apart."""
    return [ix(a, age_ms=1000 * k, n=k) for k, a in enumerate(actions)]


@pytest.mark.parametrize(
    ("interaction", "expected", "bounce", "positive"),
    [
        (ix("purchase"), 1.0, False, True),
        (ix("add_to_cart"), 0.6, False, True),
        (ix("click"), 0.3, False, True),
        (ix("dismiss"), -0.8, False, False),
        (ix("view"), 0.0, False, False),  # no duration: neutral
        (ix("view", duration_ms=10_000), 0.2, False, True),
        (ix("view", duration_ms=9_999), 0.0, False, False),
        (ix("view", duration_ms=2_000), 0.0, False, False),
        (ix("view", duration_ms=1_999), -0.2, True, False),
        (ix("view", duration_ms=0), -0.2, True, False),
        (ix("share"), 0.0, False, False),
    ],
    ids=[
        "purchase",
        "cart",
        "click",
        "dismiss",
        "view-no-duration",
        "view-long-10s",
        "view-just-short-of-long",
        "view-2s-not-bounce",
        "view-bounce",
        "view-zero",
        "unknown-action",
    ],
)
def test_valence(interaction: Interaction, expected: float, bounce: bool, positive: bool) -> None:
    assert valence(interaction) == pytest.approx(expected)
    assert is_bounce(interaction) is bounce
    assert is_positive(interaction) is positive


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        ((), 0.0),
        (("click",), 0.3),
        (("purchase",) * 12, 1.0),
        (("dismiss",) * 12, -0.8),
        # newest first: weights 1 and 0.8
        (("purchase", "dismiss"), (1.0 * 1 + 0.8 * -0.8) / 1.8),
        (("dismiss", "purchase"), (-0.8 * 1 + 0.8 * 1.0) / 1.8),
        # only the last 10 count: an old purchase streak does not lift a dismissive session
        (("dismiss",) * 10 + ("purchase",) * 20, -0.8),
    ],
    ids=[
        "empty",
        "one-click",
        "all-purchases",
        "all-dismisses",
        "recent-purchase",
        "recent-dismiss",
        "window-of-10",
    ],
)
def test_sentiment(actions: tuple[str, ...], expected: float) -> None:
    assert sentiment(session(*actions)) == pytest.approx(expected)


def test_sentiment_weights_recent_interactions_more() -> None:
    assert sentiment(session("purchase", "dismiss")) > sentiment(session("dismiss", "purchase"))


@pytest.mark.parametrize(
    "actions",
    [
        ("purchase",) * 10,
        ("dismiss",) * 10,
        ("purchase", "dismiss", "add_to_cart", "view", "click"),
    ],
    ids=["max", "min", "mixed"],
)
def test_sentiment_stays_in_bounds(actions: tuple[str, ...]) -> None:
    assert -1.0 <= sentiment(session(*actions)) <= 1.0


@pytest.mark.parametrize(
    ("ages_ms", "expected"),
    [
        ((), 0.0),
        ((0,), 1 / 3),
        ((0, 60_000, 120_000), 1.0),
        ((0, 180_000), 2 / 3),  # the window's edge counts
        ((0, 180_001), 1 / 3),
        ((0,) * 18, 6.0),  # 18 in three minutes: 6 per minute, above the seed's 5
        ((200_000, 300_000), 0.0),
    ],
    ids=["empty", "one", "three-in-window", "edge-included", "just-outside", "fast", "all-old"],
)
def test_engagement_velocity(ages_ms: tuple[int, ...], expected: float) -> None:
    s = [ix("view", age_ms=a, n=k) for k, a in enumerate(ages_ms)]
    assert engagement_velocity(s, NOW) == pytest.approx(expected)


def bounce(k: int) -> Interaction:
    return ix("view", age_ms=1000 * k, duration_ms=500, n=k)


def long_view(k: int) -> Interaction:
    return ix("view", age_ms=1000 * k, duration_ms=20_000, n=k)


@pytest.mark.parametrize(
    ("interactions", "expected"),
    [
        ([], 0.0),
        (session("click", "view"), 0.0),
        (session("dismiss", "click"), 0.5),
        ([bounce(0), *session("click")], 0.25),  # a bounce counts half
        (session("dismiss", "dismiss", "click", "click"), 0.5),
        # 8 views, none positive: 0 + the fruitless-session penalty
        (session(*("view",) * 8), 0.3),
        # 7 views: not yet fruitless
        (session(*("view",) * 7), 0.0),
        # 8 interactions with one long view: not fruitless
        ([long_view(0), *session(*("view",) * 7)], 0.0),
        # a click older than the window still makes the session fruitful
        ([*session(*("view",) * 10), ix("click", age_ms=60_000, n=99)], 0.0),
        # 10 dismisses + penalty: clipped to 1
        (session(*("dismiss",) * 12), 1.0),
        # 3 dismisses of 10 + penalty
        (session(*("dismiss",) * 3, *("view",) * 7), 0.6),
    ],
    ids=[
        "empty",
        "calm",
        "one-dismiss-of-two",
        "bounce-half",
        "half-dismissed",
        "fruitless-session",
        "seven-not-fruitless",
        "long-view-is-positive",
        "old-click-counts",
        "clipped",
        "dismisses-plus-penalty",
    ],
)
def test_frustration(interactions: list[Interaction], expected: float) -> None:
    assert frustration(interactions) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("interactions", "page", "expected"),
    [
        ([], None, ScrollBehavior.BROWSING),
        ([], PageType.HOME, ScrollBehavior.BROWSING),
        ([], PageType.CATEGORY, ScrollBehavior.BROWSING),
        ([], PageType.SEARCH, ScrollBehavior.SEARCHING),
        ([], PageType.ITEM_DETAIL, ScrollBehavior.DECIDING),
        (session("view", "add_to_cart"), PageType.SEARCH, ScrollBehavior.DECIDING),
        (
            [ix("click", category="shoes", n=1), ix("click", category="shoes", n=2)],
            PageType.HOME,
            ScrollBehavior.DECIDING,
        ),
        (
            [ix("click", category="shoes", n=1), ix("click", category="books", n=2)],
            PageType.HOME,
            ScrollBehavior.BROWSING,
        ),
        (
            [ix("click", category="shoes", n=1), ix("view", category="shoes", n=2)],
            PageType.SEARCH,
            ScrollBehavior.SEARCHING,
        ),
        # two clicks in one category, but not among the last five interactions
        (
            [*session(*("view",) * 5), ix("click", category="a", n=8), ix("click", category="a")],
            None,
            ScrollBehavior.BROWSING,
        ),
        # clicks without a category do not make a focus
        ([ix("click", n=1), ix("click", n=2)], None, ScrollBehavior.BROWSING),
    ],
    ids=[
        "nothing",
        "home",
        "category-page",
        "search-page",
        "item-page",
        "cart-beats-search",
        "two-clicks-one-category",
        "clicks-two-categories",
        "click-and-view",
        "focus-too-old",
        "clicks-without-category",
    ],
)
def test_scroll_behavior(
    interactions: list[Interaction], page: PageType | None, expected: ScrollBehavior
) -> None:
    assert scroll_behavior(interactions, page) is expected


@pytest.mark.parametrize(
    ("interactions", "page", "expected"),
    [
        ([], None, EmotionalState()),
        (
            session("purchase", "click", "view"),
            PageType.ITEM_DETAIL,
            EmotionalState(
                sentiment=round((1.0 + 0.8 * 0.3) / (1 + 0.8 + 0.64), 4),
                engagement_velocity=1.0,
                frustration=0.0,
                scroll_behavior=ScrollBehavior.DECIDING,
            ),
        ),
        (
            session("dismiss", "dismiss", "view"),
            PageType.SEARCH,
            EmotionalState(
                sentiment=round((-0.8 - 0.8 * 0.8) / (1 + 0.8 + 0.64), 4),
                engagement_velocity=1.0,
                frustration=round(2 / 3, 4),
                scroll_behavior=ScrollBehavior.SEARCHING,
            ),
        ),
    ],
    ids=["empty-is-neutral", "happy-decider", "frustrated-searcher"],
)
def test_emotional_state(
    interactions: list[Interaction], page: PageType | None, expected: EmotionalState
) -> None:
    assert emotional_state(interactions, page, NOW) == expected
