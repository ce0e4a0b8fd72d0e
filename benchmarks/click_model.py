"""The position-based click model of the simulated shop (``benchmarks.shop_world``).

P(click | user j, item i, position p) = examine(p) x attract(j, i): whether the user looks
at position p at all (examine(p) = 1 / p^0.7, falling down the slate) and whether the item,
once seen, draws the click (attract(j, i) = sigmoid(a + b <u_j, z_i> + quality_i)). Under
this model a slate's expected clicks are sum_p examine(p) attract(j, slate[p]), which is
what regret is computed from. Graded outcomes follow a click: add to cart with probability
``cart_given_click x attract``, then purchase with ``purchase_given_cart x attract``; an
examined, strongly disliked item (attract below ``dismiss_below``) is dismissed with
probability ``dismiss_rate``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float64]
Vector = npt.NDArray[np.float64]
Rows = npt.NDArray[np.intp]
Flags = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class ClickModel:
    """The position-based click model and the graded outcomes after a click.

    ``attract_bias`` (a) and ``attract_scale`` (b) are calibrated together with the taste
    geometry of ``benchmarks.shop_world.WorldConfig`` so that a user's best items attract
    30-50% and a random item a few percent (see that module's docstring).
    """

    examine_power: float = 0.7
    attract_bias: float = -4.3
    attract_scale: float = 3.6
    cart_given_click: float = 0.6
    purchase_given_cart: float = 0.5
    dismiss_below: float = 0.01
    dismiss_rate: float = 0.10


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the user did with each position of a slate (one flag per position)."""

    clicked: Flags
    carted: Flags
    purchased: Flags
    dismissed: Flags


def examination(k: int, power: float) -> Vector:
    """The chance that position p = 1..k is looked at: 1 / p^power."""
    return 1.0 / np.arange(1, k + 1, dtype=np.float64) ** power


def sigmoid(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return 1.0 / (1.0 + np.exp(-x))


def attraction(
    preference: Matrix, taste: Matrix, quality: Vector, bias: float, scale: float
) -> Matrix:
    """attract(j, i) = sigmoid(bias + scale <u_j, z_i> + quality_i), (users, items)."""
    return sigmoid(bias + scale * (preference @ taste.T) + quality[np.newaxis, :])


def expected_clicks(attract: Vector, examine: Vector) -> float:
    """Expected clicks of a slate whose items attract ``attract`` in position order."""
    return float(examine[: len(attract)] @ attract)


def top_k(scores: Vector, k: int) -> Rows:
    """The rows of the k highest scores, highest first (ties: the lower row first)."""
    if k >= len(scores):
        return np.argsort(-scores, kind="stable").astype(np.intp)
    head = np.argpartition(-scores, k - 1)[:k]
    return head[np.argsort(-scores[head], kind="stable")].astype(np.intp)


def sample_outcome(
    rng: np.random.Generator, attract: Vector, examine: Vector, click: ClickModel
) -> Outcome:
    """Sample what the user does with a slate whose items attract ``attract``."""
    n = len(attract)
    looked = rng.random(n) < examine[:n]
    clicked = looked & (rng.random(n) < attract)
    carted = clicked & (rng.random(n) < click.cart_given_click * attract)
    purchased = carted & (rng.random(n) < click.purchase_given_cart * attract)
    disliked = attract < click.dismiss_below
    dismissed = looked & ~clicked & disliked & (rng.random(n) < click.dismiss_rate)
    return Outcome(clicked=clicked, carted=carted, purchased=purchased, dismissed=dismissed)
