"""What users are like: the population prior of their models (``relevance.user_model``),
estimated from the users themselves (empirical Bayes), so that a user's first clicks move
them from where users are, not from nowhere.

A user's model is learnt, stored and streamed under the configured prior, N(0, learnt_var
I) (``PERSO_USER_PRIOR_SCALE``): what it holds is the evidence of their observations,
expressed as the posterior that prior gives. The population prior is N(m, Σ) with Σ = v I +
U diag(λ) Uᵀ: the mean taste of the users, how much tastes spread around it in every
direction (v), and, when the workers estimate it with a rank (``PERSO_POPULATION_RANK``),
the directions U in which tastes co-vary and how much more they spread along each (λ), in
the item vector space. In natural parameters the evidence is what the posterior adds to the
prior (precision ``1/var - 1/learnt_var``, precision-weighted mean ``mean/var``):

- ``for_ranking`` puts a model under the whole prior, the posterior a ranking draws from: a
  diagonal plus the rank's factor (``UserModel.factor``), so that evidence on one item
  moves the user along the directions tastes co-vary in (Woodbury's identity: a k x k solve
  per model).
- ``under`` puts it under the prior's diagonal (each dimension's marginal variance), what a
  worker updates a user under; ``learnt`` is its inverse, what the worker stores after. Exact
  for a Gaussian model; for the probit filter, whose updates depended on the prior they were
  made under, the updates themselves are made under the population prior (the worker puts
  the model under it, updates, and stores the result back in the learnt form), so only the
  rounding of the stored form is approximate.

``estimate`` is expectation-maximisation over users' evidence (a Gaussian hierarchical
model with known diagonal sites): each user's posterior under the current prior (``for_ranking``'s
algebra, for all users at once), then m the mean of their posterior means, and the spread
from the mean of the squared deviations plus the posterior covariances: at rank 0 its
average over dimensions (v), at rank k its k leading eigenvectors (U), the excess of their
eigenvalues over the average of the rest (λ) and that average (v, probabilistic PCA's
estimate), a few times over. The workers re-estimate it from the users they updated lately
(``origin.worker.population``), version it and store it once (``model:population``);
origins read it, pools carry it to the edges.

Measured in process on the family's click-only shops (``benchmarks.learning``'s worlds, in
a simulation of the product's learning): users under the estimated prior ended 4-5 points of
final-tenth regret lower than under the configured one (a learnt scale alone: 0-2 points,
not consistently). Through the product on the family (rank 20 against rank 0 in the same
session), the rank made the final tenth 4-8 points worse in the click, dismiss and graded
shops at seed 1 (even at seed 2, cumulative 2-3 worse) and 3-8 better in the subtle one
(hidden tastes behind noisy vectors) at both; median at seed 1, 68.4% against 62.7%. A
user's evidence is stored diagonal, one axis at a time: under a prior whose axes co-vary,
that approximation of a click's rank-one evidence claims certainty in directions the click
said nothing about. What would pay is evidence kept in the prior's basis (a k x k
precision per user), which a basis re-estimated every few seconds makes hard to keep; so
the shipped rank is 0.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from protocol.exceptions import MalformedMessage
from relevance.user_model import UserModel, with_prior

Vector = npt.NDArray[np.float32]
Matrix = npt.NDArray[np.float32]
_Array = npt.NDArray[np.float64]

# EM's passes per estimate: from the previous estimate, a few move it where the users are.
EM_ITERATIONS = 10
# Users an estimate needs at least: fewer say too little about what users are like.
MIN_USERS = 30
# A population variance is never taken below this share of the learnt one, nor above this
# multiple of it: a prior with no room to move, or one with no hold, would stop learning.
MIN_VAR_SHARE = 0.05
MAX_VAR_SHARE = 4.0
# The largest rank a prior is estimated or read with.
MAX_RANK = 64

_HEADER = struct.Struct("<IIHf")  # version, users, dimension, variance
_RANK = struct.Struct("<H")  # after the mean, when the prior has a rank


@dataclass(frozen=True, slots=True)
class Population:
    """A population prior N(``mean``, ``var`` I + ``basis`` diag(``spread``) ``basis``ᵀ),
    its ``version`` (estimates only grow) and how many users it was estimated from.
    ``basis``: (dim, rank) orthonormal columns, the directions tastes co-vary in; ``spread``
    (rank,): how much more than ``var`` they spread along each. Rank 0: None, None."""

    version: int
    mean: Vector
    var: float
    users: int
    basis: Matrix | None = None
    spread: Vector | None = None

    @property
    def dim(self) -> int:
        return int(self.mean.shape[0])

    @property
    def rank(self) -> int:
        return 0 if self.basis is None else int(self.basis.shape[1])

    def marginal(self) -> _Array:
        """Each dimension's prior variance: the diagonal of the covariance."""
        out = np.full(self.dim, float(self.var))
        if self.basis is not None and self.spread is not None:
            basis = self.basis.astype(np.float64)
            out = out + (basis * basis) @ self.spread.astype(np.float64)
        return out


def scaled(population: Population, factor: float) -> Population:
    """``population`` with its spread times ``factor`` (a ranking policy's prior strength
    relative to the learnt one: 1, itself)."""
    if factor == 1.0:
        return population
    spread = None if population.spread is None else population.spread * np.float32(factor)
    return replace(population, var=population.var * factor, spread=spread)


def _evidence(model: UserModel, learnt_var: float) -> tuple[_Array, _Array]:
    """What ``model`` (learnt under N(0, ``learnt_var`` I)) adds to its prior, in natural
    parameters: precision and precision-weighted mean."""
    var = model.var.astype(np.float64)
    return np.maximum(1.0 / var - 1.0 / learnt_var, 0.0), model.mean.astype(np.float64) / var


def under(model: UserModel, learnt_var: float, population: Population | None) -> UserModel:
    """``model`` (learnt under N(0, ``learnt_var`` I)) under ``population``'s diagonal, each
    dimension's marginal variance (None: as learnt): what a worker updates a user under."""
    if population is None or population.dim != model.dim:
        return model
    precision, shifted = _evidence(model, learnt_var)
    prior_var = population.marginal()
    new_var = 1.0 / (1.0 / prior_var + precision)
    mean = new_var * (shifted + population.mean.astype(np.float64) / prior_var)
    return UserModel(mean.astype(np.float32), new_var.astype(np.float32))


def learnt(model: UserModel, learnt_var: float, population: Population | None) -> UserModel:
    """The inverse of ``under``: ``model`` (a posterior under ``population``'s diagonal) in
    the form it is stored and streamed, under N(0, ``learnt_var`` I)."""
    if population is None or population.dim != model.dim:
        return model
    prior_var = population.marginal()
    var = model.var.astype(np.float64)
    precision = np.maximum(1.0 / var - 1.0 / prior_var, 0.0)
    shifted = model.mean.astype(np.float64) / var - population.mean.astype(np.float64) / (prior_var)
    new_var = 1.0 / (1.0 / learnt_var + precision)
    return UserModel((new_var * shifted).astype(np.float32), new_var.astype(np.float32))


@dataclass(frozen=True, slots=True)
class _Posteriors:
    """Users' posteriors under a prior of rank k, by row: mean (users, dim), the diagonal
    (users, dim) and, when asked for, each one's factor (users, dim, k): covariance diag +
    factor factorᵀ."""

    mean: _Array
    var: _Array
    factor: _Array | None


def _posteriors(
    precision: _Array, shifted: _Array, population: Population, *, factors: bool
) -> _Posteriors:
    """Each row's evidence (``_evidence``, stacked) under the whole ``population`` prior,
    with each row's factor when ``factors``.

    With Σ = v I + U Λ Uᵀ (U orthonormal), Σ⁻¹ = I/v - U C Uᵀ, C = diag(λ / (v (v + λ))). The
    posterior precision is D - U C Uᵀ with D = 1/v + precision (diagonal), and by Woodbury
    its covariance D⁻¹ + D⁻¹U M⁻¹ UᵀD⁻¹ with M = C⁻¹ - UᵀD⁻¹U (k x k, positive: C⁻¹ > v I ≥
    UᵀD⁻¹U); the factor is D⁻¹U L with L Lᵀ = M⁻¹. A direction with λ = 0 adds nothing."""
    v = float(population.var)
    users, dim = precision.shape
    inv_d = 1.0 / (1.0 / v + precision)
    mean_pop = population.mean.astype(np.float64)
    spread = population.spread
    kept = np.flatnonzero(spread > 0) if spread is not None else np.empty(0, np.intp)
    if population.basis is None or spread is None or kept.shape[0] == 0:
        post_mean = inv_d * (shifted + mean_pop / v)
        return _Posteriors(post_mean, inv_d, np.zeros((users, dim, 0)) if factors else None)
    basis = population.basis[:, kept].astype(np.float64)
    lam = spread[kept].astype(np.float64)
    k = lam.shape[0]
    c = lam / (v * (v + lam))
    y = inv_d * (shifted + mean_pop / v - basis @ (c * (basis.T @ mean_pop)))
    pairs = (basis[:, :, None] * basis[:, None, :]).reshape(dim, k * k)
    m = np.diag(1.0 / c)[None, :, :] - (inv_d @ pairs).reshape(users, k, k)  # M per row
    m_inv = np.linalg.inv(m)
    m_inv = 0.5 * (m_inv + np.transpose(m_inv, (0, 2, 1)))
    along = np.matmul(m_inv, (y @ basis)[:, :, None])[:, :, 0]  # M⁻¹ Uᵀ y
    post_mean = y + inv_d * (along @ basis.T)
    factor = None
    if factors:
        factor = inv_d[:, :, None] * np.matmul(basis[None, :, :], np.linalg.cholesky(m_inv))
    return _Posteriors(post_mean, inv_d, factor)


def for_ranking(model: UserModel, learnt_var: float, population: Population | None) -> UserModel:
    """``model`` (learnt under N(0, ``learnt_var`` I)) under the whole ``population`` prior:
    the posterior a ranking draws from, with a factor when the prior has a rank (None: as
    learnt; rank 0: ``under``)."""
    if population is None or population.dim != model.dim:
        return model
    if population.rank == 0:
        return under(model, learnt_var, population)
    precision, shifted = _evidence(model, learnt_var)
    got = _posteriors(precision[None, :], shifted[None, :], population, factors=True)
    assert got.factor is not None
    factor = got.factor[0].astype(np.float32) if got.factor.shape[2] else None
    return UserModel(got.mean[0].astype(np.float32), got.var[0].astype(np.float32), factor)


def as_ranked(
    model: UserModel, *, learnt_scale: float, ranked_scale: float, population: Population | None
) -> UserModel:
    """A user's ``model``, learnt under the prior scale ``learnt_scale``
    (``PERSO_USER_PRIOR_SCALE``), as a ranking of prior scale ``ranked_scale`` (its policy's)
    puts it: under the users' ``population`` prior, its spread scaled by their ratio; without
    one (or one of another dimension), under the ranking's prior strength alone. What the
    origin's and an edge's rankings draw from, and retrieve near."""
    dim = model.mean.shape[0]
    learnt_var = learnt_scale / dim
    if population is not None and population.dim == dim:
        return for_ranking(model, learnt_var, scaled(population, ranked_scale / learnt_scale))
    return with_prior(model, learnt_var, ranked_scale / dim)


def estimate(
    models: Sequence[UserModel],
    learnt_var: float,
    start: Population | None = None,
    *,
    rank: int = 0,
    iterations: int = EM_ITERATIONS,
) -> Population | None:
    """The population prior (version 0: the caller numbers it) that ``models`` (learnt under
    N(0, ``learnt_var`` I)) say, of ``rank`` co-varying directions, by
    expectation-maximisation from ``start`` (None: the learnt prior); None for fewer than
    ``MIN_USERS`` models."""
    if len(models) < MIN_USERS:
        return None
    var = np.stack([m.var for m in models]).astype(np.float64)
    precision = np.maximum(1.0 / var - 1.0 / learnt_var, 0.0)
    shifted = np.stack([m.mean for m in models]).astype(np.float64) / var
    users, dim = precision.shape
    rank = max(0, min(rank, dim - 1, MAX_RANK))
    if start is None:
        start = Population(0, np.zeros(dim, np.float32), learnt_var, users)
    elif start.rank != rank:
        start = replace(start, var=float(start.marginal().mean()), basis=None, spread=None)
    current = start
    low, high = MIN_VAR_SHARE * learnt_var, MAX_VAR_SHARE * learnt_var
    for _ in range(iterations):
        if rank == 0:
            post = _posteriors(precision, shifted, current, factors=False)
            mean = post.mean.mean(axis=0)
            spread = float(np.clip(((post.mean - mean) ** 2 + post.var).mean(), low, high))
            current = Population(0, mean.astype(np.float32), spread, users)
            continue
        mean, second = _moments(precision, shifted, current)
        values, vectors = np.linalg.eigh(second)  # ascending
        top = values[::-1][:rank]
        rest = float(np.clip(values[::-1][rank:].mean(), low, high))
        current = Population(
            0,
            mean.astype(np.float32),
            rest,
            users,
            basis=np.ascontiguousarray(vectors[:, ::-1][:, :rank]).astype(np.float32),
            spread=np.clip(top - rest, 0.0, high).astype(np.float32),
        )
    return current


# Users whose posteriors are formed at once in an estimate's E-step: bounds its memory
# (their factors: users x dim x rank float64, 16 MB at 1,024 x 128 x 16).
_CHUNK = 1_024


def _moments(precision: _Array, shifted: _Array, population: Population) -> tuple[_Array, _Array]:
    """EM's expectations under ``population``: the mean of the users' posterior means, and
    the mean over users of their second moment about it (the posterior mean's deviation
    squared plus the posterior covariance), dim x dim."""
    users, dim = precision.shape
    means = np.empty((users, dim))
    second = np.zeros((dim, dim))
    diagonal = np.zeros(dim)
    for first in range(0, users, _CHUNK):
        rows = slice(first, first + _CHUNK)
        post = _posteriors(precision[rows], shifted[rows], population, factors=True)
        assert post.factor is not None
        means[rows] = post.mean
        diagonal += post.var.sum(axis=0)
        second += np.tensordot(post.factor, post.factor, axes=([0, 2], [0, 2]))
    mean = means.mean(axis=0)
    deviation = means - mean
    second += deviation.T @ deviation
    second[np.diag_indices(dim)] += diagonal
    return mean, second / users


def population_bytes(population: Population) -> bytes:
    """The prior as it is stored and carried: version, users, dimension, variance, then the
    mean as little-endian float32; with a rank, then the rank (uint16), the spreads and the
    basis (row-major), little-endian float32."""
    header = _HEADER.pack(population.version, population.users, population.dim, population.var)
    out = header + np.asarray(population.mean, "<f4").tobytes()
    if population.basis is None or population.spread is None:
        return out
    return (
        out
        + _RANK.pack(population.rank)
        + np.asarray(population.spread, "<f4").tobytes()
        + np.asarray(population.basis, "<f4").tobytes()
    )


def population_from_bytes(raw: bytes) -> Population:
    """``population_bytes``'s prior; ``MalformedMessage`` for bytes of another size, a
    non-finite number, a variance that is not positive or a spread that is negative."""
    if len(raw) < _HEADER.size:
        raise MalformedMessage(f"population prior of {len(raw)} bytes is shorter than its header")
    version, users, dim, var = _HEADER.unpack_from(raw)
    plain = _HEADER.size + 4 * dim
    rank = 0
    if len(raw) >= plain + _RANK.size:
        (rank,) = _RANK.unpack_from(raw, plain)
    size = plain if rank == 0 else plain + _RANK.size + 4 * rank * (dim + 1)
    if len(raw) != size or rank > MAX_RANK:
        raise MalformedMessage(
            f"population prior of dimension {dim} and rank {rank} is {size} bytes, not {len(raw)}"
        )
    mean = np.frombuffer(raw, "<f4", dim, _HEADER.size).copy()
    if not (np.isfinite(mean).all() and np.isfinite(var) and var > 0):
        raise MalformedMessage("population prior with a non-finite mean or a variance not > 0")
    if rank == 0:
        return Population(version, mean, float(var), users)
    spread = np.frombuffer(raw, "<f4", rank, plain + _RANK.size).copy()
    basis = np.frombuffer(raw, "<f4", dim * rank, plain + _RANK.size + 4 * rank).copy()
    if not (np.isfinite(spread).all() and np.isfinite(basis).all() and (spread >= 0).all()):
        raise MalformedMessage("population prior with a non-finite basis or a negative spread")
    return Population(version, mean, float(var), users, basis.reshape(dim, rank), spread)
