"""Algorithm 1 (seed 001): one incremental update of a user's embedding.

    weight    = action_weight * exp(-hours_since_interaction / 24)
    update    = learning_rate * weight * (item - user)
    update    = momentum * previous_update + (1 - momentum) * update   (if there is one)
    user      = normalise(user + update); version += 1

A user with no embedding starts at the origin, so the first positive interaction puts them
on the item's direction; a first interaction that only pushes away (a dismiss) has nothing
to move, and leaves them without an embedding.

``update_embedding`` is the scalar reference; ``update_rows`` applies one interaction to
each of many users at once (the stream worker's micro-batches: the k-th interactions of
all users of a batch in one vectorised step, k = 1, 2, ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

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


@dataclass
class BatchState:
    """The states of several users as arrays, one row per user; a row without an
    embedding (or momentum) holds zeros and a False flag."""

    embedding: npt.NDArray[np.float32]  # (users, dim)
    has_embedding: npt.NDArray[np.bool_]
    momentum: npt.NDArray[np.float32]
    has_momentum: npt.NDArray[np.bool_]


def update_rows(
    state: BatchState,
    rows: npt.NDArray[np.intp],
    items: npt.NDArray[np.float32],
    weights: npt.NDArray[np.float64],
) -> npt.NDArray[np.bool_]:
    """``update_embedding`` for one interaction of each user in ``rows`` (distinct), in
    place, vectorised; returns which of them changed (a first interaction that only
    pushes away changes nothing, as in the scalar version)."""
    has = state.has_embedding[rows]
    changed = has | (weights > 0)
    rows, items, weights = rows[changed], items[changed], weights[changed]
    current = np.where(state.has_embedding[rows, None], state.embedding[rows], 0.0)
    update = (LEARNING_RATE * weights)[:, None] * (items - current)
    with_momentum = state.has_momentum[rows, None]
    update = np.where(
        with_momentum, MOMENTUM * state.momentum[rows] + (1 - MOMENTUM) * update, update
    ).astype(np.float32)
    moved = (current + update).astype(np.float32)
    norms = np.linalg.norm(moved, axis=1, keepdims=True)
    usable = (norms > 0) & np.isfinite(norms)
    state.embedding[rows] = np.where(usable, moved / np.where(usable, norms, 1.0), moved)
    state.momentum[rows] = update
    state.has_embedding[rows] = True
    state.has_momentum[rows] = True
    return changed
