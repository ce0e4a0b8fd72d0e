from __future__ import annotations

import math

import numpy as np
import pytest

from origin.embedding_update import (
    ACTION_WEIGHTS,
    BatchState,
    EmbeddingState,
    interaction_weight,
    update_embedding,
    update_rows,
)


def reference(
    user: list[float] | None,
    momentum: list[float] | None,
    item: list[float],
    action: str,
    age_hours: float,
) -> tuple[list[float], list[float]]:
    """Seed 001's Algorithm 1 written out with scalars, the way the seed states it."""
    weights = {"view": 0.1, "click": 0.3, "add_to_cart": 0.5, "purchase": 1.0, "dismiss": -0.2}
    weight = weights[action] * math.exp(-age_hours / 24)
    current = user if user is not None else [0.0] * len(item)
    update = [0.1 * weight * (i - c) for i, c in zip(item, current, strict=True)]
    if momentum is not None:
        update = [0.9 * p + (1 - 0.9) * u for p, u in zip(momentum, update, strict=True)]
    new = [c + u for c, u in zip(current, update, strict=True)]
    norm = math.sqrt(sum(x * x for x in new))
    return [x / norm for x in new], update


def vec(values: list[float]) -> np.ndarray:
    return np.array(values, dtype=np.float32)


@pytest.mark.parametrize("action", ["view", "click", "add_to_cart", "purchase", "dismiss"])
@pytest.mark.parametrize("age_hours", [0.0, 1.5, 24.0, 100.0])
@pytest.mark.parametrize("with_momentum", [False, True])
def test_matches_the_scalar_reference(action: str, age_hours: float, with_momentum: bool) -> None:
    rng = np.random.default_rng(3)
    user = rng.standard_normal(16)
    user /= np.linalg.norm(user)
    item = rng.standard_normal(16)
    item /= np.linalg.norm(item)
    momentum = rng.standard_normal(16) * 0.01 if with_momentum else None
    state = EmbeddingState(vec(list(user)), None if momentum is None else vec(list(momentum)), 7)
    out = update_embedding(state, vec(list(item)), action, age_hours)
    expected_emb, expected_update = reference(
        list(user), None if momentum is None else list(momentum), list(item), action, age_hours
    )
    assert out is not None
    assert out.version == 8
    assert out.embedding is not None
    assert out.momentum is not None
    assert np.allclose(out.embedding, expected_emb, atol=1e-6)
    assert np.allclose(out.momentum, expected_update, atol=1e-7)
    assert math.isclose(float(np.linalg.norm(out.embedding)), 1.0, rel_tol=1e-5)


def test_positive_interaction_moves_the_user_toward_the_item() -> None:
    user, item = vec([1, 0, 0]), vec([0, 1, 0])
    out = update_embedding(EmbeddingState(user, None, 0), item, "purchase", 0.0)
    assert out is not None
    assert out.embedding is not None
    assert float(out.embedding @ item) > 0


def test_dismiss_moves_the_user_away_from_the_item() -> None:
    user, item = vec([0.8, 0.6, 0]), vec([0, 1, 0])
    out = update_embedding(EmbeddingState(user, None, 0), item, "dismiss", 0.0)
    assert out is not None
    assert out.embedding is not None
    assert float(out.embedding @ item) < 0.6


def test_a_new_user_starts_on_the_first_positive_item() -> None:
    item = vec([0, 0.6, 0.8])
    out = update_embedding(EmbeddingState(None, None, 0), item, "view", 2.0)
    assert out is not None
    assert out.embedding is not None
    assert np.allclose(out.embedding, item)
    assert out.version == 1


def test_a_new_user_whose_first_signal_is_a_dismiss_stays_without_embedding() -> None:
    assert update_embedding(EmbeddingState(None, None, 0), vec([1, 0]), "dismiss", 0.0) is None


@pytest.mark.parametrize(
    ("action", "age_hours", "weight"),
    [
        ("purchase", 0.0, 1.0),
        ("purchase", 24.0, math.exp(-1)),
        ("click", 48.0, 0.3 * math.exp(-2)),
        ("view", -5.0, 0.1),  # a timestamp from the future counts as now
        ("dismiss", 0.0, -0.2),
    ],
)
def test_interaction_weight(action: str, age_hours: float, weight: float) -> None:
    assert math.isclose(interaction_weight(action, age_hours), weight)


def test_action_weights_are_the_seeds() -> None:
    assert ACTION_WEIGHTS == {
        "view": 0.1,
        "click": 0.3,
        "add_to_cart": 0.5,
        "purchase": 1.0,
        "dismiss": -0.2,
    }


def _scalar_sequence(
    start: EmbeddingState, steps: list[tuple[np.ndarray, str, float]]
) -> EmbeddingState:
    state = start
    for item, action, age in steps:
        updated = update_embedding(state, item, action, age)
        if updated is not None:
            state = updated
    return state


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_batched_updates_equal_the_scalar_reference(seed: int) -> None:
    """Several users, several interactions each (dismisses on fresh users included): the
    vectorised rounds give what the scalar Algorithm 1 gives, user by user."""
    rng = np.random.default_rng(seed)
    dim, users = 16, 12
    actions = ["view", "click", "add_to_cart", "purchase", "dismiss"]
    items = rng.standard_normal((30, dim)).astype(np.float32)
    items /= np.linalg.norm(items, axis=1, keepdims=True)
    plans = [
        [
            (items[rng.integers(30)], str(rng.choice(actions)), float(rng.uniform(0, 48)))
            for _ in range(int(rng.integers(1, 6)))
        ]
        for _ in range(users)
    ]
    starts = [EmbeddingState(items[u] if u % 3 else None, None, 0) for u in range(users)]
    batch = BatchState(
        embedding=np.stack(
            [s.embedding if s.embedding is not None else np.zeros(dim) for s in starts]
        ).astype(np.float32),
        has_embedding=np.array([s.embedding is not None for s in starts]),
        momentum=np.zeros((users, dim), np.float32),
        has_momentum=np.zeros(users, dtype=bool),
    )
    for k in range(max(len(p) for p in plans)):
        rows = [u for u in range(users) if k < len(plans[u])]
        update_rows(
            batch,
            np.array(rows, np.intp),
            np.stack([plans[u][k][0] for u in rows]),
            np.array([interaction_weight(plans[u][k][1], plans[u][k][2]) for u in rows]),
        )
    for u in range(users):
        expected = _scalar_sequence(starts[u], plans[u])
        if expected.embedding is None:
            assert not batch.has_embedding[u]
            continue
        np.testing.assert_allclose(batch.embedding[u], expected.embedding, atol=1e-5)
        assert expected.momentum is not None
        np.testing.assert_allclose(batch.momentum[u], expected.momentum, atol=1e-5)
