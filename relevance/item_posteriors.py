"""Items' engagement rates as Beta posteriors: how often users engage with an item when they
examine it (a click or better), and their draws on the probit scale where they meet the
user's term (``relevance.user_model``).

Successes are engagements; failures are examined impressions without one, each counted by
the chance that its position was examined (``relevance.examination``), so an item is not
blamed for being shown where nobody looks.

Evidence is kept per context cell (device and daypart, where tastes may differ) and for all
contexts together. A cell's posterior is shrunk toward the item's all-context rate with
``SHRINK_STRENGTH`` pseudo-observations, so a cell with little evidence of its own ranks by
the item's overall rate, and one with much evidence by its own: ``shrunk``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from relevance.normal import ppf

Array = npt.NDArray[np.float64]

# Pseudo-observations of the all-context rate a context cell starts from.
SHRINK_STRENGTH = 10.0


def shrunk(
    cell_alpha: Array,
    cell_beta: Array,
    all_alpha: Array,
    all_beta: Array,
    *,
    prior_alpha: float,
    prior_beta: float,
    strength: float = SHRINK_STRENGTH,
) -> tuple[Array, Array]:
    """The cells' (alpha, beta) with ``strength`` pseudo-observations at the all-context
    mean in place of the flat prior; all arrays aligned by item."""
    mean = all_alpha / (all_alpha + all_beta)
    alpha = cell_alpha - prior_alpha + strength * mean
    beta = cell_beta - prior_beta + strength * (1.0 - mean)
    return np.maximum(alpha, 1e-3), np.maximum(beta, 1e-3)


def probit_means(alpha: Array, beta: Array) -> Array:
    """Φ⁻¹ of each posterior's mean: the baselines of the user model's updates."""
    return ppf(alpha / (alpha + beta))


def probit_draws(
    alpha: Array, beta: Array, rng: np.random.Generator, n: int, spread: float = 1.0
) -> Array:
    """``n`` Thompson draws of every item's rate, on the probit scale: an (n, items) array.
    ``spread`` scales each draw's distance from the posterior mean (0: the mean)."""
    mean = alpha / (alpha + beta)
    if spread == 0:
        return np.broadcast_to(ppf(mean), (n, mean.shape[0])).copy()
    rates = rng.beta(alpha, beta, size=(n, mean.shape[0]))
    if spread != 1.0:
        rates = np.clip(mean + spread * (rates - mean), 1e-6, 1 - 1e-6)
    return ppf(rates)
