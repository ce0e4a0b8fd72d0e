"""What users are like: the population prior of their models (``relevance.user_model``),
estimated from the users themselves (empirical Bayes), so that a user's first clicks move
them from where users are, not from nowhere.

A user's model is learnt, stored and streamed under the configured prior, N(0, learnt_var
I) (``PERSO_USER_PRIOR_SCALE``): what it holds is the evidence of their observations,
expressed as the posterior that prior gives. The population prior is N(m, v I): the mean
taste of the users and how much tastes spread around it, per dimension, in the item vector
space. ``under`` puts a model under it: in natural parameters the evidence is what the
posterior adds to the prior (precision ``1/var - 1/learnt_var``, precision-weighted mean
``mean/var``), and the same evidence on the population prior gives the posterior a ranking
draws from. ``learnt`` is the inverse: what a worker stores after updating a user under the
population prior. Exact for a Gaussian model; for the probit filter, whose updates depended
on the prior they were made under, the updates themselves are made under the population
prior (the worker puts the model under it, updates, and stores the result back in the
learnt form), so only the rounding of the stored form is approximate.

``estimate`` is expectation-maximisation over users' evidence (a Gaussian hierarchical
model with known sites): each user's posterior under the current (m, v), then m the mean of
their posterior means and v the mean over users and dimensions of the squared deviations
plus the posterior variances, a few times over. The workers re-estimate it from the users
they updated lately (``origin.worker.population``), version it and store it once
(``model:population``); origins read it, pools carry it to the edges.

Measured in process on the family's click-only shops (``benchmarks.learning``'s worlds, in
a simulation of the product's learning): users under the estimated prior ended 4-5 points of
final-tenth regret lower than under the configured one (a learnt scale alone: 0-2 points,
not consistently); a low-rank covariance of tastes, even the true one, paid only with a
full posterior in its own basis, and estimated from the users online it did not pay at
these horizons, so the prior's covariance stays isotropic.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from protocol.exceptions import MalformedMessage
from relevance.user_model import UserModel

Vector = npt.NDArray[np.float32]

# EM's passes per estimate: from the previous estimate, a few move it where the users are.
EM_ITERATIONS = 10
# Users an estimate needs at least: fewer say too little about what users are like.
MIN_USERS = 30
# A population variance is never taken below this share of the learnt one, nor above this
# multiple of it: a prior with no room to move, or one with no hold, would stop learning.
MIN_VAR_SHARE = 0.05
MAX_VAR_SHARE = 4.0

_HEADER = struct.Struct("<IIHf")  # version, users, dimension, variance


@dataclass(frozen=True, slots=True)
class Population:
    """A population prior N(``mean``, ``var`` I), its ``version`` (estimates only grow) and
    how many users it was estimated from."""

    version: int
    mean: Vector
    var: float
    users: int

    @property
    def dim(self) -> int:
        return int(self.mean.shape[0])


def scaled(population: Population, factor: float) -> Population:
    """``population`` with its spread times ``factor`` (a ranking policy's prior strength
    relative to the learnt one: 1, itself)."""
    if factor == 1.0:
        return population
    return replace(population, var=population.var * factor)


def under(model: UserModel, learnt_var: float, population: Population | None) -> UserModel:
    """``model`` (learnt under N(0, ``learnt_var`` I)) under ``population`` (None: as
    learnt)."""
    if population is None or population.dim != model.dim:
        return model
    var = model.var.astype(np.float64)
    precision = np.maximum(1.0 / var - 1.0 / learnt_var, 0.0)
    shifted = model.mean.astype(np.float64) / var
    new_var = 1.0 / (1.0 / population.var + precision)
    mean = new_var * (shifted + population.mean.astype(np.float64) / population.var)
    return UserModel(mean.astype(np.float32), new_var.astype(np.float32))


def learnt(model: UserModel, learnt_var: float, population: Population | None) -> UserModel:
    """The inverse of ``under``: ``model`` (a posterior under ``population``) in the form
    it is stored and streamed, under N(0, ``learnt_var`` I)."""
    if population is None or population.dim != model.dim:
        return model
    var = model.var.astype(np.float64)
    precision = np.maximum(1.0 / var - 1.0 / population.var, 0.0)
    shifted = model.mean.astype(np.float64) / var - population.mean.astype(np.float64) / (
        population.var
    )
    new_var = 1.0 / (1.0 / learnt_var + precision)
    return UserModel((new_var * shifted).astype(np.float32), new_var.astype(np.float32))


def estimate(
    models: Sequence[UserModel],
    learnt_var: float,
    start: Population | None = None,
    *,
    iterations: int = EM_ITERATIONS,
) -> tuple[Vector, float] | None:
    """The population prior's (mean, variance) that ``models`` (learnt under N(0,
    ``learnt_var`` I)) say, by expectation-maximisation from ``start`` (None: the learnt
    prior); None for fewer than ``MIN_USERS`` models."""
    if len(models) < MIN_USERS:
        return None
    var = np.stack([m.var for m in models]).astype(np.float64)
    precision = np.maximum(1.0 / var - 1.0 / learnt_var, 0.0)
    shifted = np.stack([m.mean for m in models]).astype(np.float64) / var
    dim = precision.shape[1]
    mean = np.zeros(dim) if start is None else start.mean.astype(np.float64)
    spread = learnt_var if start is None else start.var
    low, high = MIN_VAR_SHARE * learnt_var, MAX_VAR_SHARE * learnt_var
    for _ in range(iterations):
        post_var = 1.0 / (1.0 / spread + precision)
        post_mean = post_var * (shifted + mean / spread)
        mean = post_mean.mean(axis=0)
        spread = float(np.clip(((post_mean - mean) ** 2 + post_var).mean(), low, high))
    return mean.astype(np.float32), spread


def population_bytes(population: Population) -> bytes:
    """The prior as it is stored and carried: version, users, dimension, variance, then the
    mean as little-endian float32."""
    header = _HEADER.pack(population.version, population.users, population.dim, population.var)
    return header + np.asarray(population.mean, "<f4").tobytes()


def population_from_bytes(raw: bytes) -> Population:
    """``population_bytes``'s prior; ``MalformedMessage`` for bytes of another size, a
    non-finite number or a variance that is not positive."""
    if len(raw) < _HEADER.size:
        raise MalformedMessage(f"population prior of {len(raw)} bytes is shorter than its header")
    version, users, dim, var = _HEADER.unpack_from(raw)
    if len(raw) != _HEADER.size + 4 * dim:
        raise MalformedMessage(
            f"population prior of dimension {dim} is {_HEADER.size + 4 * dim} bytes, not {len(raw)}"
        )
    mean = np.frombuffer(raw, "<f4", offset=_HEADER.size).copy()
    if not (np.isfinite(mean).all() and np.isfinite(var) and var > 0):
        raise MalformedMessage("population prior with a non-finite mean or a variance not > 0")
    return Population(version, mean, float(var), users)
