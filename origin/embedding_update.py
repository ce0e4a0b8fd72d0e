"""Algorithm 1 (seed 001): one incremental update of a user's embedding.

    weight    = action_weight * exp(-hours_since_interaction / 24)
    update    = learning_rate * weight * (item - user)
    update    = momentum * previous_update + (1 - momentum) * update   (if there is one)
    user      = normalise(user + update); version += 1

A user with no embedding starts at the origin, so the first positive interaction puts them
on the item's direction; a first interaction that only pushes away (a dismiss) has nothing
to move, and leaves them without an embedding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from protocol.vectors import Vector, l2_normalize

ACTION_WEIGHTS: dict[str, float] = {
    "view": 0.1,
    "click": 0.3,
    "add_to_cart": 0.5,
    "purchase": 1.0,
    "dismiss": -0.2,
}
MOMENTUM = 0.9
LEARNING_RATE = 0.1
DECAY_HOURS = 24.0


@dataclass(frozen=True)
class EmbeddingState:
    embedding: Vector | None
    momentum: Vector | None
    version: int


def interaction_weight(action: str, age_hours: float) -> float:
    """Action weight times exponential decay; an interaction from the future counts as now."""
    return ACTION_WEIGHTS[action] * math.exp(-max(0.0, age_hours) / DECAY_HOURS)


def update_embedding(
    state: EmbeddingState, item: Vector, action: str, age_hours: float
) -> EmbeddingState | None:
    """The state after one interaction, or None when the interaction changes nothing."""
    weight = interaction_weight(action, age_hours)
    current = state.embedding
    if current is None:
        if weight <= 0:
            return None
        current = np.zeros_like(item)
    update = (LEARNING_RATE * weight) * (item - current)
    if state.momentum is not None:
        update = MOMENTUM * state.momentum + (1 - MOMENTUM) * update
    update = update.astype(np.float32)
    embedding = l2_normalize((current + update).astype(np.float32))
    return EmbeddingState(embedding=embedding, momentum=update, version=state.version + 1)
