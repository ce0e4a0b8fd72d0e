"""A user's taste as a Bayesian probit model on the item vectors, moved by what the user
engages with and by what they are shown and leave alone.

When a user examines item i, they engage with it (click or better) with probability

    P(engage | examined) = Φ(b_i + θ · x_i)

where x_i is the item's unified vector (the catalog's, L2-normalised), b_i the item's
baseline on the probit scale (how often everybody engages with it: its Beta posterior,
``relevance.item_posteriors``) and θ the user's deviation from that baseline. θ has a
diagonal Gaussian posterior N(mean, diag var) and the prior N(0, prior_var · I): a user of
whom nothing is known ranks like everybody (shrunk toward the population), and evidence
moves each dimension by as much as it is uncertain.

An observation (x, engaged, weight) updates the posterior in closed form by assumed
density filtering for probit regression with a diagonal covariance (Graepel et al.,
"Web-Scale Bayesian Click-Through Rate Prediction for Sponsored Search", ICML 2010). A
negative is weighted by how likely its position was examined (``relevance.examination``):
the update is tempered by that weight, so an item at the bottom of a long slate, likely
never seen, teaches little. Engagements and non-engagements both move the mean; each
observation narrows the variance along the item's direction.

Time: without news a user's certainty fades, the variance relaxing toward the prior with a
half-life (the Bayesian form of the streaming embedding update's decay), so that old tastes
can be overturned. The streaming embedding update's momentum has no place in a Bayesian
filter: the posterior mean already averages the evidence by its certainty.

Ranking draws θ̃ ~ N(mean, diag var) once per decision (Thompson sampling on the user's own
posterior; ``draw``), and ``relevance.slate`` scores candidates with it. A model as ranked
under a population prior whose tastes co-vary (``relevance.population.for_ranking``) also holds a
``factor`` F: its covariance is diag(var) + F Fᵀ, so that a click moves the draws along the
directions tastes co-vary in. A model as learnt, stored and streamed has none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from protocol.exceptions import MalformedMessage
from relevance.normal import v_w_one

Vector = npt.NDArray[np.float32]
Matrix = npt.NDArray[np.float32]
# A prior's variance: the same in every dimension, or each dimension's own (a population
# prior's marginal variances, ``relevance.population.Population.marginal``).
PriorVar = float | npt.NDArray[np.float64]

# The prior's variance per dimension is PRIOR_SCALE / dim: with unit item vectors, the prior
# spread (sd) of θ · x is sqrt(PRIOR_SCALE / dim) probit units, 0.5 at the default dimension
# of 128: room for a user's taste to move an item's score by about as much as tastes do.
# Measured on benchmarks.learning (20,000 slates): scale 1 (sd 0.09) learnt users so slowly
# that regret stayed near 69% at the end; 32 ended at 47%, 100 at 50%.
PRIOR_SCALE = 32.0
# The variance never drops below this share of the prior: a floor that keeps a user who
# changes their mind learnable after thousands of observations.
MIN_VAR_SHARE = 1e-3


@dataclass(frozen=True, slots=True)
class UserModel:
    """The posterior of θ: ``mean`` and ``var``, float32 vectors of the catalog's dimension,
    and as ranked under a population prior of co-varying tastes a ``factor`` (dim, rank):
    the covariance is diag(var) + factor factorᵀ."""

    mean: Vector
    var: Vector
    factor: Matrix | None = None

    @property
    def dim(self) -> int:
        return int(self.mean.shape[0])

    @classmethod
    def prior(cls, dim: int, scale: float = PRIOR_SCALE) -> UserModel:
        """Nothing known: θ = 0 (the population's ranking), variance ``scale / dim``."""
        return cls(np.zeros(dim, np.float32), np.full(dim, scale / dim, np.float32))

    def certainty(self, prior_var: float) -> float:
        """How much of the prior's variance the evidence has removed, in [0, 1]."""
        return float(1.0 - np.mean(self.var) / prior_var)


def relaxed(
    model: UserModel, elapsed_s: float, prior_var: PriorVar, half_life_s: float
) -> UserModel:
    """``model`` after ``elapsed_s`` without news: each dimension's variance moves toward
    the prior's (``prior_var``: one for all, or each dimension's), halfway every
    ``half_life_s`` (0: never)."""
    if half_life_s <= 0 or elapsed_s <= 0:
        return model
    keep = np.float32(math.pow(0.5, elapsed_s / half_life_s))
    var = (keep * model.var + (1 - keep) * np.asarray(prior_var, np.float32)).astype(np.float32)
    return UserModel(model.mean, var)


def updated(
    model: UserModel,
    items: Matrix,
    baselines: npt.NDArray[np.float64],
    engaged: npt.NDArray[np.bool_],
    weights: npt.NDArray[np.float64],
    *,
    prior_var: PriorVar,
) -> UserModel:
    """The posterior after observing the rows of ``items`` (their vectors), in order: each
    with its item's probit ``baselines`` value, whether the user ``engaged``, and the
    observation's weight in [0, 1] (1 for an engagement; for a non-engagement, how likely
    it was examined)."""
    mean = model.mean.astype(np.float64)
    var = model.var.astype(np.float64)
    floor = MIN_VAR_SHARE * prior_var
    rows = zip(
        items.astype(np.float64),
        baselines.tolist(),
        engaged.tolist(),
        weights.tolist(),
        strict=True,
    )
    for x, b, y, w in rows:
        if w <= 0:
            continue
        sign = 1.0 if y else -1.0
        xx = x * x
        s2 = 1.0 + float(np.dot(xx, var))
        s = math.sqrt(s2)
        t = sign * (float(b) + float(np.dot(mean, x))) / s
        v, wf = v_w_one(t)  # one value: plain floats, not a one-element array
        mean = mean + w * sign * (var * x) * (v / s)
        var = np.maximum(var * (1.0 - w * (xx * var) / s2 * wf), floor)
    return UserModel(mean.astype(np.float32), var.astype(np.float32))


def draw(model: UserModel, rng: np.random.Generator, spread: float = 1.0) -> Vector:
    """θ̃ ~ N(mean, (diag var + factor factorᵀ) · spread²): one Thompson draw (``spread`` 0:
    the mean)."""
    if spread == 0:
        return model.mean
    out: Vector = draws(model, rng, 1, spread)[0]
    return out


def draws(model: UserModel, rng: np.random.Generator, n: int, spread: float = 1.0) -> Matrix:
    """``n`` independent draws, one per row."""
    noise = rng.standard_normal((n, model.dim)).astype(np.float32)
    deviation = np.sqrt(model.var) * noise
    if model.factor is not None and model.factor.shape[1] > 0:
        along = rng.standard_normal((n, model.factor.shape[1])).astype(np.float32)
        deviation = deviation + along @ model.factor.T
    out: Matrix = model.mean + np.float32(spread) * deviation
    return out


def model_bytes(model: UserModel) -> bytes:
    """The model as it travels and is stored: its mean then its variance, little-endian
    float16 (``4 * dim`` bytes; 512 at the default dimension of 128). A factor is not part
    of it (``relevance.population.for_ranking`` gives one; what carries it says so)."""
    if model.factor is not None:
        raise ValueError("a model with a factor (as ranked) is not stored or streamed")
    return np.asarray(model.mean, "<f2").tobytes() + np.asarray(model.var, "<f2").tobytes()


def model_from_bytes(raw: bytes, dim: int) -> UserModel:
    """``model_bytes``'s model of dimension ``dim``; ``MalformedMessage`` for bytes of
    another size or a non-finite value or a variance that is not positive."""
    if len(raw) != 4 * dim:
        raise MalformedMessage(
            f"a user model of dimension {dim} is {4 * dim} bytes, not {len(raw)}"
        )
    halves = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    mean, var = halves[:dim].copy(), halves[dim:].copy()
    if not (np.isfinite(mean).all() and np.isfinite(var).all() and (var > 0).all()):
        raise MalformedMessage("user model with a non-finite or non-positive value")
    return UserModel(mean, var)


def with_prior(model: UserModel, prior_var: float, new_prior_var: float) -> UserModel:
    """``model``, learnt under the prior variance ``prior_var``, as if learnt under
    ``new_prior_var``: a policy's prior strength, applied when ranking
    (``protocol.policies``).

    In natural parameters the evidence is what the posterior adds to the prior: precision
    ``1/var - 1/prior_var`` and precision-weighted mean ``mean/var``. The same evidence on
    the new prior gives ``var' = 1 / (1/new_prior_var + evidence)`` and ``mean' = var' *
    mean / var``. Exact for a Gaussian model; for the probit filter, whose updates depended
    on the prior they were made under, a first-order approximation that keeps what the
    evidence said and how sure it was. A ``factor`` (the co-varying tastes' part of a
    model as ranked) scales with the prior's spread."""
    if new_prior_var == prior_var:
        return model
    var = model.var.astype(np.float64)
    evidence = np.maximum(1.0 / var - 1.0 / prior_var, 0.0)
    new_var = 1.0 / (1.0 / new_prior_var + evidence)
    mean = model.mean.astype(np.float64) * new_var / var
    factor = None
    if model.factor is not None:
        factor = (model.factor * np.float32(math.sqrt(new_prior_var / prior_var))).astype(
            np.float32
        )
    return UserModel(mean.astype(np.float32), new_var.astype(np.float32), factor)
