"""The user's emotional state (``emotional_state``), derived from the session.

Signals, each a pure function of the session's interactions (newest first) and the page:

- sentiment in [-1, 1]: recency-weighted mean valence of the last ``SENTIMENT_WINDOW``
  interactions (purchase +1, add to cart +0.6, click +0.3, a view held 10 s or more +0.2,
  a view abandoned within 2 s -0.2, dismiss -0.8);
- engagement velocity: interactions per minute over the last ``VELOCITY_WINDOW_MS``;
- frustration in [0, 1]: dismisses and abandoned views among the last
  ``FRUSTRATION_WINDOW`` interactions, plus a long session without a single positive act;
- scroll behaviour: ``deciding`` (on an item page, something in the cart, or clicking
  within one category), ``searching`` (on a search page), else ``browsing``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from origin.ranking.history import Interaction
from protocol.actions import ENGAGED_ACTIONS
from protocol.api import PageType


class ScrollBehavior(StrEnum):
    """What the user is doing on the page (its scroll behaviour): re-ranking favours
    clear calls to action and comparisons when ``deciding`` and new categories when
    ``browsing``; ``searching`` fires no rule."""

    BROWSING = "browsing"
    SEARCHING = "searching"
    DECIDING = "deciding"


@dataclass(frozen=True, slots=True)
class EmotionalState:
    """A session's emotional state, the input of the re-ranking rules: sentiment in
    [-1, 1], engagement velocity in interactions per minute, frustration in [0, 1] and the
    scroll behaviour. The defaults (``NEUTRAL``) are what an empty session yields on a
    browsing page."""

    sentiment: float = 0.0
    engagement_velocity: float = 0.0
    frustration: float = 0.0
    scroll_behavior: ScrollBehavior = ScrollBehavior.BROWSING


NEUTRAL = EmotionalState()

SENTIMENT_WINDOW = 10
SENTIMENT_RECENCY = 0.8  # weight of the k-th newest interaction: 0.8 ** k
FRUSTRATION_WINDOW = 10
VELOCITY_WINDOW_MS = 180_000
LONG_VIEW_MS = 10_000
BOUNCE_MS = 2_000
# A session this long without a click, cart or purchase adds to frustration.
FRUITLESS_SESSION = 8
FRUITLESS_PENALTY = 0.3
BOUNCE_FRUSTRATION = 0.5

_VALENCE = {"purchase": 1.0, "add_to_cart": 0.6, "click": 0.3, "dismiss": -0.8}


def valence(interaction: Interaction) -> float:
    """How positive one interaction is, in [-1, 1]: purchase +1, add to cart +0.6, click +0.3,
    dismiss -0.8; a view +0.2 when held ``LONG_VIEW_MS`` (10 s) or more and -0.2 when abandoned
    within ``BOUNCE_MS`` (2 s). Anything else, a view without a duration included, is 0."""
    if interaction.action == "view":
        duration = interaction.duration_ms
        if duration is None:
            return 0.0
        if duration >= LONG_VIEW_MS:
            return 0.2
        if duration < BOUNCE_MS:
            return -0.2
        return 0.0
    return _VALENCE.get(interaction.action, 0.0)


def is_bounce(interaction: Interaction) -> bool:
    """Whether the interaction is a view abandoned within ``BOUNCE_MS`` (2 s); a view whose
    duration is unknown is not one."""
    return (
        interaction.action == "view"
        and interaction.duration_ms is not None
        and interaction.duration_ms < BOUNCE_MS
    )


def is_positive(interaction: Interaction) -> bool:
    """Whether the interaction shows interest: an engaged action (click, add to cart,
    purchase) or a view held ``LONG_VIEW_MS`` (10 s) or more. A long session with none adds
    to frustration; re-ranking counts the session's items it holds for as engaged before."""
    return interaction.action in ENGAGED_ACTIONS or (
        interaction.action == "view" and (interaction.duration_ms or 0) >= LONG_VIEW_MS
    )


def sentiment(session: Sequence[Interaction]) -> float:
    """The recency-weighted mean valence of the newest ``SENTIMENT_WINDOW`` interactions (the
    k-th newest weighs 0.8 ** k), clipped to [-1, 1]; 0 for an empty session."""
    recent = session[:SENTIMENT_WINDOW]
    if not recent:
        return 0.0
    weights = [SENTIMENT_RECENCY**k for k in range(len(recent))]
    score = sum(w * valence(i) for w, i in zip(weights, recent, strict=True)) / sum(weights)
    return max(-1.0, min(1.0, score))


def engagement_velocity(session: Sequence[Interaction], now_ms: int) -> float:
    """Interactions per minute over the last three minutes."""
    recent = sum(1 for i in session if now_ms - i.timestamp_ms <= VELOCITY_WINDOW_MS)
    return recent / (VELOCITY_WINDOW_MS / 60_000)


def frustration(session: Sequence[Interaction]) -> float:
    """Dismisses (1 each) and bounces (0.5 each) per interaction among the newest
    ``FRUSTRATION_WINDOW``, plus ``FRUITLESS_PENALTY`` (0.3) when a session of at least
    ``FRUITLESS_SESSION`` interactions has no positive one; clipped to [0, 1], 0 when empty."""
    recent = session[:FRUSTRATION_WINDOW]
    if not recent:
        return 0.0
    dismissed = sum(1 for i in recent if i.action == "dismiss")
    bounced = sum(1 for i in recent if is_bounce(i))
    score = (dismissed + BOUNCE_FRUSTRATION * bounced) / len(recent)
    if len(session) >= FRUITLESS_SESSION and not any(is_positive(i) for i in session):
        score += FRUITLESS_PENALTY
    return max(0.0, min(1.0, score))


def scroll_behavior(session: Sequence[Interaction], page_type: PageType | None) -> ScrollBehavior:
    """``deciding`` on an item page, once something is in the cart, or after two clicks in one
    category among the newest five interactions; else ``searching`` on a search page; else
    ``browsing``."""
    if page_type == PageType.ITEM_DETAIL:
        return ScrollBehavior.DECIDING
    if any(i.action == "add_to_cart" for i in session):
        return ScrollBehavior.DECIDING
    clicked = Counter(i.category for i in session[:5] if i.action == "click" and i.category)
    if clicked and clicked.most_common(1)[0][1] >= 2:
        return ScrollBehavior.DECIDING
    if page_type == PageType.SEARCH:
        return ScrollBehavior.SEARCHING
    return ScrollBehavior.BROWSING


def emotional_state(
    session: Sequence[Interaction], page_type: PageType | None, now_ms: int
) -> EmotionalState:
    """The state of a session whose interactions are given newest first."""
    return EmotionalState(
        sentiment=round(sentiment(session), 4),
        engagement_velocity=round(engagement_velocity(session, now_ms), 4),
        frustration=round(frustration(session), 4),
        scroll_behavior=scroll_behavior(session, page_type),
    )
