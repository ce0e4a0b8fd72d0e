"""The action vocabulary: what each user action means, in one table keyed by
``protocol.api.Action``. Every process that gives an action a meaning reads it here: the
stream worker (Algorithm 1's weights), the bandit (how an action becomes a reward), the
context features and the emotional state (which actions engage, which buy), and the
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
    # Algorithm 1 (seed 001): how far the action moves the user's embedding toward the
    # item (negative: away from it).
    weight: float
    # Shows interest: click or better (seed 001 "clicked", "engaged").
    engaged: bool
    # Buys, or is about to.
    buying: bool
    # Changes what the user should see at once (seed 000 "high-value interactions"): a
    # purchased item must not be recommended again from a cached entry.
    invalidating: bool


MEANINGS: Mapping[Action, Meaning] = MappingProxyType(
    {
        Action.VIEW: Meaning(weight=0.1, engaged=False, buying=False, invalidating=False),
        Action.CLICK: Meaning(weight=0.3, engaged=True, buying=False, invalidating=False),
        Action.ADD_TO_CART: Meaning(weight=0.5, engaged=True, buying=True, invalidating=False),
        Action.PURCHASE: Meaning(weight=1.0, engaged=True, buying=True, invalidating=True),
        Action.DISMISS: Meaning(weight=-0.2, engaged=False, buying=False, invalidating=False),
    }
)

ACTION_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {action.value: meaning.weight for action, meaning in MEANINGS.items()}
)
ENGAGED_ACTIONS = frozenset(a.value for a, m in MEANINGS.items() if m.engaged)
BUYING_ACTIONS = frozenset(a.value for a, m in MEANINGS.items() if m.buying)
INVALIDATING_ACTIONS = frozenset(a.value for a, m in MEANINGS.items() if m.invalidating)


def reward_of(action: str, override: float | None = None) -> float:
    """The reward an interaction gives a Beta posterior, in [0, 1]: the client's override,
    else the action's weight, clipped (a dismiss is a failure, not a negative alpha)."""
    raw = override if override is not None else ACTION_WEIGHTS.get(action, 0.0)
    return min(1.0, max(0.0, raw))
