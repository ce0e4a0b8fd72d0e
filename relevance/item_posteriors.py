"""Items' engagement rates as Beta posteriors: how often users engage with an item when they
examine it (a click or better), and their draws on the probit scale where they meet the
user's term (``relevance.user_model``).

Successes are engagements; failures are examined impressions without one, each counted by
the chance that its position was examined (``relevance.examination``), so an item is not
blamed for being shown where nobody looks.

Evidence is kept per context cell (device and daypart, where tastes may differ) and for all
contexts together. A cell's posterior is shrunk toward the item's all-context rate with
``SHRINK_STRENGTH`` pseudo-observations, so a cell with little evidence of its own ranks by
the item's overall rate, and one with much evidence by its own: ``shrunk``. What a decision
ranks by (``effective``): the stored evidence decayed with age (``decayed``), an unseen
item's prior inherited from its category among the candidates (``with_cold_priors``), the
cell shrunk toward all contexts; the origin computes it from Redis, an edge from its pool
and the posteriors the workers stream to it (``edge.ranking.live_posteriors``), with this code.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class PosteriorConfig:
    prior_alpha: float = 1.0
    prior_beta: float = 1.0
    # Evidence decays toward the prior with this half-life (0: never).
    decay_half_life_s: float = 7 * 86_400.0
    # Pseudo-observations an unobserved item's prior inherits from its category (or all
    # items) among the candidates: the cold-item prior ("inherit from similar items").
    cold_prior_strength: float = 4.0
    # Pseudo-observations of the all-context rate a context cell starts from.
    shrink_strength: float = 10.0
    # The rank's estimate: the rate with this many pseudo-observations at RANK_PRIOR_MEAN,
    # so that one lucky engagement does not put an item at the top.
    rank_prior_strength: float = 20.0


# Where an unseen item's rate is assumed to be for the rank (a typical engagement rate).
RANK_PRIOR_MEAN = 0.02


@dataclass(frozen=True, slots=True)
class Posteriors:
    """Beta parameters aligned with some items; ``observed`` False where nothing is stored
    (alpha and beta then hold the prior)."""

    alpha: Array
    beta: Array
    updated_ms: Array
    observed: npt.NDArray[np.bool_]

    @classmethod
    def prior(cls, n: int, config: PosteriorConfig) -> Posteriors:
        return cls(
            np.full(n, config.prior_alpha),
            np.full(n, config.prior_beta),
            np.zeros(n),
            np.zeros(n, bool),
        )

    @classmethod
    def from_rows(cls, rows: Array, config: PosteriorConfig) -> Posteriors:
        """From rows of (alpha, beta, updated ms); a row without positive alpha and beta
        (missing or damaged) is the prior, unobserved."""
        observed = (rows[:, 0] > 0) & (rows[:, 1] > 0)
        return cls(
            alpha=np.where(observed, rows[:, 0], config.prior_alpha),
            beta=np.where(observed, rows[:, 1], config.prior_beta),
            updated_ms=np.where(observed, rows[:, 2], 0.0),
            observed=observed,
        )


def decayed(p: Posteriors, now_ms: float, config: PosteriorConfig) -> Posteriors:
    """``p`` as of ``now_ms``: evidence shrinks toward the prior with age (as ``ADD`` does
    before it adds)."""
    if config.decay_half_life_s <= 0:
        return p
    age_s = np.maximum(now_ms - p.updated_ms, 0.0) / 1000.0
    factor = np.where(p.observed, np.power(0.5, age_s / config.decay_half_life_s), 1.0)
    return Posteriors(
        alpha=config.prior_alpha + factor * (p.alpha - config.prior_alpha),
        beta=config.prior_beta + factor * (p.beta - config.prior_beta),
        updated_ms=p.updated_ms,
        observed=p.observed,
    )


def with_cold_priors(
    p: Posteriors, category: npt.NDArray[np.integer], config: PosteriorConfig
) -> Posteriors:
    """Every item's evidence on top of ``cold_prior_strength`` pseudo-observations at the
    evidence-weighted rate of the observed items of its category (of all observed items
    for a category with none; ``RANK_PRIOR_MEAN`` with nothing observed at all) in place of
    the flat prior: the cold-item prior ("use content-based prior, inherit from similar
    items"). A cold
    item starts where its neighbours are, not at Beta(1, 1)'s even odds, and an item with
    little evidence is not ranked as if half of everyone engaged with it: engagement rates
    are a few percent, and a flat prior would make every barely-seen item look like a
    winner."""
    observed = p.observed
    if observed.size == 0:
        return p
    evidence = np.maximum(p.alpha + p.beta - config.prior_alpha - config.prior_beta, 0.0)
    successes = np.maximum(p.alpha - config.prior_alpha, 0.0)
    codes = np.asarray(category)
    size = int(codes.max()) + 1
    w = np.where(observed, evidence, 0.0)
    hits = np.where(observed, np.minimum(successes, evidence), 0.0)
    by_evidence = np.bincount(codes, weights=w, minlength=size)
    by_hits = np.bincount(codes, weights=hits, minlength=size)
    overall = float(hits.sum() / w.sum()) if w.sum() > 0 else RANK_PRIOR_MEAN
    rate = np.divide(by_hits, by_evidence, out=np.full(size, overall), where=by_evidence > 0)
    inherited = np.clip(rate[codes], 1e-3, 0.999)
    strength = config.cold_prior_strength
    own_hits = np.where(observed, np.minimum(successes, evidence), 0.0)
    own_misses = np.where(observed, evidence - own_hits, 0.0)
    return Posteriors(
        alpha=own_hits + strength * inherited,
        beta=own_misses + strength * (1 - inherited),
        updated_ms=p.updated_ms,
        observed=observed,
    )


def effective(
    cell: Posteriors,
    everywhere: Posteriors,
    category: npt.NDArray[np.integer],
    now_ms: float,
    config: PosteriorConfig,
) -> tuple[Array, Array]:
    """The (alpha, beta) a decision in ``cell`` ranks by: the all-context posteriors
    decayed and given cold priors, the cell's decayed and shrunk toward them."""
    base = with_cold_priors(decayed(everywhere, now_ms, config), category, config)
    local = decayed(cell, now_ms, config)
    return shrunk(
        local.alpha,
        local.beta,
        base.alpha,
        base.beta,
        prior_alpha=config.prior_alpha,
        prior_beta=config.prior_beta,
        strength=config.shrink_strength,
    )
