"""DR's reward model (``evaluation.reward_model``) on logs drawn from a known
position-based click model: examination by position times attraction by item."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.reward_model import fit

EXAMINE = np.array([1.0, 0.7, 0.45, 0.3])
ATTRACT = {f"it-{i}": a for i, a in enumerate([0.6, 0.45, 0.3, 0.2, 0.12, 0.06, 0.03, 0.01])}
ITEMS = list(ATTRACT)


def clicks(n: int, rng: np.random.Generator) -> tuple[list[list[str]], np.ndarray, np.ndarray]:
    """``n`` uniformly random slates of the items, each position's click drawn from
    examination times attraction."""
    k = EXAMINE.shape[0]
    slates = [[ITEMS[j] for j in rng.permutation(len(ITEMS))[:k]] for _ in range(n)]
    truth = np.array([[ATTRACT[item] for item in slate] for slate in slates]) * EXAMINE
    reward = (rng.random((n, k)) < truth).astype(np.float64)
    return slates, reward, np.ones((n, k), bool)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_fit_recovers_examination_ratios_and_the_attraction_order(seed: int) -> None:
    slates, reward, shown = clicks(20_000, np.random.default_rng(seed))
    model = fit(slates, reward, shown)
    ratios = model.examination / model.examination[0]
    np.testing.assert_allclose(ratios, EXAMINE / EXAMINE[0], rtol=0.1)
    # the items by fitted attraction are the items by true attraction
    assert sorted(ITEMS, key=lambda i: -model.attraction[i]) == ITEMS
    # and what it predicts is the click rate there
    for item in ("it-0", "it-3"):
        for k in range(EXAMINE.shape[0]):
            assert model.predict(item, k) == pytest.approx(ATTRACT[item] * EXAMINE[k], abs=0.03)


def test_an_item_the_log_never_showed_predicts_the_mean_attraction() -> None:
    slates, reward, shown = clicks(2_000, np.random.default_rng(3))
    model = fit(slates, reward, shown)
    mean = float(np.mean(list(model.attraction.values())))
    assert model.mean_attraction == pytest.approx(mean)
    for k in range(EXAMINE.shape[0]):
        expected = model.examination[k] * mean
        assert model.predict("never-shown", k) == pytest.approx(expected)
        assert model.predict_mean(k) == pytest.approx(expected)


def test_positions_left_empty_teach_nothing() -> None:
    """A shorter slate's empty positions (``shown`` False) are not read, whatever their
    reward column holds."""
    slates, reward, shown = clicks(5_000, np.random.default_rng(4))
    short = shown.copy()
    short[::2, 3] = False
    noisy = reward.copy()
    noisy[~short] = 1.0
    assert fit(slates, noisy, short).attraction == pytest.approx(
        fit(slates, reward, short).attraction
    )


def test_an_item_seen_little_is_shrunk_toward_the_mean() -> None:
    """One click out of one show is not read as certain attraction."""
    slates, reward, shown = clicks(2_000, np.random.default_rng(5))
    slates.append(["rare", "it-7", "it-6", "it-5"])
    reward = np.vstack([reward, [[1.0, 0.0, 0.0, 0.0]]])
    shown = np.vstack([shown, [[True] * 4]])
    model = fit(slates, reward, shown)
    assert model.mean_attraction < model.attraction["rare"] < 0.5 * model.attraction["it-0"]


def test_a_log_without_shown_positions_predicts_nothing() -> None:
    model = fit([[], []], np.zeros((2, 3)), np.zeros((2, 3), bool))
    assert model.attraction == {}
    assert [model.predict("x", k) for k in range(3)] == [0.0, 0.0, 0.0]


def test_a_prediction_is_a_probability() -> None:
    """Every shown item clicked: whatever the fitted scale, a prediction stays at most 1."""
    slates = [["a", "b"], ["b", "a"]] * 50
    model = fit(slates, np.ones((100, 2)), np.ones((100, 2), bool))
    assert all(0 <= model.predict(i, k) <= 1 for i in ("a", "b", "c") for k in (0, 1))
