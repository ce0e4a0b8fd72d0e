"""Contextual Thompson sampling (seed 001 Algorithm 2, seed 000 "Contextual Bandit Engine"),
as pure, vectorised functions over the candidates of one decision.

Per candidate: theta ~ Beta(alpha, beta) of the item in the decision's context segment;
the segment's logistic context model adds lambda * (sigmoid(w . x) - 0.5); the result,
clipped to [0, 1], is blended with the retrieval score: (1 - eps) * base + eps * theta. An
item whose sampled value beats its base score is marked as exploration, as the seed does.

Beyond the seed's pseudo-code, from its failure table:

- stale posteriors decay toward the prior with a half-life (``decayed``), so an item not
  seen for weeks is uncertain again;
- a cold item (no posterior) gets a prior from similar items, the observed items of its
  category among the candidates (``cold_priors``), instead of a blind Beta(1, 1);
- a minimum share of exploration (``exploration_floor``) keeps a feedback loop from
  shutting exploration off.

Rewards enter the Beta update clipped to [0, 1]: a dismiss is a failure, not a negative
alpha. The context weights are one vector per segment (the seed stores one per item and
segment: with 64 features an item would need thousands of its own observations before its
weights meant anything; a shared model learns from every interaction in the segment).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from origin.embedding_update import ACTION_WEIGHTS

Vector = npt.NDArray[np.float64]
Flags = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class BanditConfig:
    exploration_weight: float = 0.3  # epsilon of Algorithm 2
    context_weight: float = 0.2  # lambda
    learning_rate: float = 0.01  # eta of the context weights' gradient step
    prior_alpha: float = 1.0
    prior_beta: float = 1.0
    # Posteriors decay toward the prior with this half-life (0 disables).
    decay_half_life_s: float = 7 * 86_400.0
    # How many observations' worth of evidence a prior inherited from similar items has.
    cold_prior_strength: float = 4.0
    # Seed 000: "Exploration < 5% -> force minimum exploration".
    min_exploration: float = 0.05


@dataclass(frozen=True)
class Posteriors:
    """Beta parameters of the candidates, aligned with them; ``observed`` is False where
    the store had nothing (then alpha and beta hold the prior)."""

    alpha: Vector
    beta: Vector
    updated_ms: Vector
    observed: Flags

    @classmethod
    def prior(cls, n: int, config: BanditConfig) -> Posteriors:
        return cls(
            alpha=np.full(n, config.prior_alpha),
            beta=np.full(n, config.prior_beta),
            updated_ms=np.zeros(n),
            observed=np.zeros(n, dtype=bool),
        )


@dataclass(frozen=True)
class Decision:
    sampled: Vector  # adjusted theta in [0, 1]
    final: Vector  # blended score
    exploration: Flags  # sampled > base
    uncertainty: Vector  # 1 / sqrt(alpha + beta)


def reward_of(action: str, override: float | None = None) -> float:
    """The reward an interaction gives a posterior, in [0, 1]."""
    # Seed 001 action weights are the rewards unless the client overrides them.
    raw = override if override is not None else ACTION_WEIGHTS.get(action, 0.0)
    return min(1.0, max(0.0, raw))


def sigmoid(z: Vector) -> Vector:
    out: Vector = 0.5 * (1.0 + np.tanh(0.5 * z))  # stable for large |z|
    return out


def decay_factor(age_s: Vector | float, half_life_s: float) -> Vector | float:
    if half_life_s <= 0:
        return 1.0 if isinstance(age_s, float) else np.ones_like(age_s)
    return np.power(0.5, np.maximum(age_s, 0.0) / half_life_s)


def decayed(posteriors: Posteriors, now_ms: float, config: BanditConfig) -> Posteriors:
    """Posteriors as of ``now_ms``: evidence shrinks toward the prior with age."""
    age_s = (now_ms - posteriors.updated_ms) / 1000.0
    factor = np.where(posteriors.observed, decay_factor(age_s, config.decay_half_life_s), 1.0)
    return Posteriors(
        alpha=config.prior_alpha + factor * (posteriors.alpha - config.prior_alpha),
        beta=config.prior_beta + factor * (posteriors.beta - config.prior_beta),
        updated_ms=posteriors.updated_ms,
        observed=posteriors.observed,
    )


def cold_priors(
    posteriors: Posteriors,
    category: npt.NDArray[np.integer],
    config: BanditConfig,
    *,
    content: Vector | None = None,
) -> Posteriors:
    """Priors for unobserved candidates (seed 000: "use content-based prior, inherit from
    similar items"), with ``cold_prior_strength`` pseudo-observations on top of the prior:

    - with observed candidates: the evidence-weighted mean of the observed candidates of
      the same category; for a category with none, ``content`` when given, else the mean
      of all observed candidates;
    - with none observed: ``content``, the candidates' retrieval scores, when given (so
      that a cold start follows relevance with a bounded spread instead of Beta(1, 1)'s
      uniform noise drowning it); else the prior unchanged.
    """
    observed = posteriors.observed
    if observed.all():
        return posteriors
    if not observed.any():
        if content is None:
            return posteriors
        return _with_prior_mean(posteriors, np.clip(content, 0.01, 0.99), config)
    mean = posteriors.alpha / (posteriors.alpha + posteriors.beta)
    evidence = np.maximum(
        posteriors.alpha + posteriors.beta - config.prior_alpha - config.prior_beta, 1e-9
    )
    codes = np.asarray(category)
    size = int(codes.max()) + 1
    w = np.where(observed, evidence, 0.0)
    sums = np.bincount(codes, weights=w * mean, minlength=size)
    weights = np.bincount(codes, weights=w, minlength=size)
    overall = float(np.sum(w * mean) / np.sum(w))
    by_category = np.divide(sums, weights, out=np.full(size, overall), where=weights > 0)
    inherited = by_category[codes]
    if content is not None:
        # No observed item of its category among the candidates: its own relevance says
        # more than the mean of unrelated items.
        inherited = np.where(weights[codes] > 0, inherited, np.clip(content, 0.01, 0.99))
    return _with_prior_mean(posteriors, inherited, config)


def _with_prior_mean(posteriors: Posteriors, inherited: Vector, config: BanditConfig) -> Posteriors:
    observed = posteriors.observed
    strength = config.cold_prior_strength
    return Posteriors(
        alpha=np.where(observed, posteriors.alpha, config.prior_alpha + strength * inherited),
        beta=np.where(observed, posteriors.beta, config.prior_beta + strength * (1 - inherited)),
        updated_ms=posteriors.updated_ms,
        observed=observed,
    )


def beta_draws(rng: np.random.Generator, alpha: Vector, beta: Vector) -> Vector:
    """Beta(alpha, beta) draws as X / (X + Y) with X ~ Gamma(alpha), Y ~ Gamma(beta): one
    vectorised gamma call, measured 1.5x faster than ``Generator.beta`` for 100 draws."""
    n = alpha.size
    gammas = rng.standard_gamma(np.concatenate([alpha, beta]))
    x = gammas[:n]
    theta: Vector = x / (x + gammas[n:])
    return theta


def sample(
    rng: np.random.Generator,
    posteriors: Posteriors,
    context_logits: Vector,
    base: Vector,
    *,
    exploration_weight: float,
    config: BanditConfig,
) -> Decision:
    """One Thompson draw for every candidate, the blend with ``base`` and the flags."""
    theta = beta_draws(rng, posteriors.alpha, posteriors.beta)
    # lambda * (sigmoid(z) - 0.5) == lambda / 2 * tanh(z / 2); np.clip is slow on small
    # arrays, so the clip is a maximum and a minimum in place.
    adjusted = theta + (0.5 * config.context_weight) * np.tanh(0.5 * context_logits)
    sampled = np.minimum(np.maximum(adjusted, 0.0, out=adjusted), 1.0, out=adjusted)
    final = base + exploration_weight * (sampled - base)
    return Decision(
        sampled=sampled,
        final=final,
        exploration=sampled > base,
        uncertainty=1.0 / np.sqrt(posteriors.alpha + posteriors.beta),
    )


def beta_update(
    alpha: float, beta: float, reward: float, *, age_s: float, config: BanditConfig
) -> tuple[float, float]:
    """Seed 000 "Posterior Updates" step 2 after the decay toward the prior: what the Lua
    script in ``posterior_store`` does, kept here as the reference it is tested against."""
    factor = float(decay_factor(age_s, config.decay_half_life_s))
    alpha = config.prior_alpha + factor * (alpha - config.prior_alpha)
    beta = config.prior_beta + factor * (beta - config.prior_beta)
    reward = min(1.0, max(0.0, reward))
    return alpha + reward, beta + (1.0 - reward)


def gradient_step(
    weights: npt.NDArray[np.float32],
    features: npt.NDArray[np.float32],
    reward: float,
    learning_rate: float,
) -> npt.NDArray[np.float32]:
    """Seed 000 step 3: w + eta * (reward - sigmoid(w . x)) * x."""
    prediction = 1.0 / (1.0 + math.exp(-float(np.dot(weights, features))))
    updated: npt.NDArray[np.float32] = (
        weights + learning_rate * (reward - prediction) * features
    ).astype(np.float32)
    return updated


def exploration_floor(
    order: npt.NDArray[np.intp],
    decision: Decision,
    count: int,
    min_share: float,
    *,
    category: npt.NDArray[np.integer] | None = None,
    cap: int | None = None,
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Make at least ``ceil(min_share * count)`` of the first ``count`` positions of
    ``order`` exploration: the last non-exploring positions give way to the explorers
    ranked below them, else to the most uncertain candidates below them.

    With ``category`` (per candidate) and ``cap``, a swap never puts more than ``cap``
    candidates of one category into the shown window (the diversity constraint holds):
    a candidate comes in only for one of its own category or while its category has room.

    Returns the new order and the candidates that were forced in.
    """
    shown = min(count, order.size)
    wanted = math.ceil(min_share * shown) if min_share > 0 else 0
    head, tail = order[:shown].copy(), order[shown:]
    have = int(np.count_nonzero(decision.exploration[head]))
    if have >= wanted or tail.size == 0:
        return order, np.empty(0, np.intp)
    missing = wanted - have
    explorers = tail[decision.exploration[tail]]
    rest = tail[~decision.exploration[tail]]
    pool = np.concatenate([explorers, rest[np.argsort(-decision.uncertainty[rest], kind="stable")]])
    taken: dict[int, int] = {}
    if category is not None:
        for candidate in head:
            code = int(category[candidate])
            taken[code] = taken.get(code, 0) + 1
    slots = [p for p in range(shown - 1, -1, -1) if not decision.exploration[head[p]]]
    forced: list[int] = []
    displaced: list[int] = []
    for candidate in pool:
        if len(forced) == missing or not slots:
            break
        slot = _slot_for(int(candidate), head, slots, category=category, cap=cap, taken=taken)
        if slot is None:
            continue
        slots.remove(slot)
        displaced.append(int(head[slot]))
        head[slot] = candidate
        forced.append(int(candidate))
    forced_rows = np.array(forced, np.intp)
    remaining = tail[~np.isin(tail, forced_rows)]
    return np.concatenate([head, np.array(displaced, np.intp), remaining]), forced_rows


def _slot_for(
    candidate: int,
    head: npt.NDArray[np.intp],
    slots: list[int],
    *,
    category: npt.NDArray[np.integer] | None,
    cap: int | None,
    taken: dict[int, int],
) -> int | None:
    """The lowest free slot ``candidate`` may take without breaking the category cap
    (updating the counts), or None."""
    if category is None or cap is None:
        return slots[0]
    code = int(category[candidate])
    for slot in slots:
        out = int(category[head[slot]])
        if out == code or taken.get(code, 0) < cap:
            taken[out] -= 1
            taken[code] = taken.get(code, 0) + 1
            return slot
    return None
