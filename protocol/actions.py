"""The action vocabulary: what each user action means, in one table keyed by
``protocol.api.Action``. Every process that gives an action a meaning reads it here: the
stream worker (the streaming embedding update's weights), the bandit (how an action becomes
a reward), the context features and the emotional state (which actions engage, which buy), and the
invalidation rules (which actions change what the user should see at once).

Interactions travel with their action as a string (events, Redis); the derived
collections below are keyed by those strings, so callers need no conversion.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from protocol.api import Action


@dataclass(frozen=True, slots=True)
class Meaning:
    # Shows interest: click or better (the user context's "clicked", "engaged"): a success for the
    # item's engagement posterior and a positive for the user's model.
    engaged: bool
    # The graded reward of an engagement, in [0, 1] (Personalizer's reward scale): what it
    # is worth to the shop. An item's engagements are worth their best grade each
    # (``relevance.item_value``); 0 for an action that does not engage.
    grade: float
    # Buys, or is about to.
    buying: bool
    # Changes what the user should see at once (the high-value interactions of layered
    # invalidation): a purchased item must not be recommended again from a cached entry.
    invalidating: bool


MEANINGS: Mapping[Action, Meaning] = MappingProxyType(
    {
        Action.VIEW: Meaning(engaged=False, grade=0.0, buying=False, invalidating=False),
        Action.CLICK: Meaning(engaged=True, grade=0.25, buying=False, invalidating=False),
        Action.ADD_TO_CART: Meaning(engaged=True, grade=0.5, buying=True, invalidating=False),
        Action.PURCHASE: Meaning(engaged=True, grade=1.0, buying=True, invalidating=True),
        Action.DISMISS: Meaning(engaged=False, grade=0.0, buying=False, invalidating=False),
    }
)

ENGAGED_ACTIONS = frozenset(a.value for a, m in MEANINGS.items() if m.engaged)
BUYING_ACTIONS = frozenset(a.value for a, m in MEANINGS.items() if m.buying)
INVALIDATING_ACTIONS = frozenset(a.value for a, m in MEANINGS.items() if m.invalidating)


# The grade every other is measured against: an engagement worth a click's.
CLICK_GRADE = MEANINGS[Action.CLICK].grade


def grade_of(action: str, override: float | None = None) -> float:
    """What an interaction is worth as a graded reward, in [0, 1]: 0 for an action that
    does not engage, else the client's ``reward_override`` (the feedback API's graded
    reward) or the action's grade."""
    try:
        meaning = MEANINGS[Action(action)]
    except ValueError:
        return 0.0
    if not meaning.engaged:
        return 0.0
    raw = override if override is not None else meaning.grade
    return min(1.0, max(0.0, raw))
