"""Logged contexts for the offline-evaluation tests: random candidates (unit vectors, Beta
posteriors), a user's model, and the record the origin would log of them."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from protocol.contexts import RankedContext
from relevance.user_model import PRIOR_SCALE, UserModel, model_bytes, model_from_bytes

DIM = 16
PRIOR_VAR = PRIOR_SCALE / DIM
Vectors = npt.NDArray[np.float32]


def unit_vectors(rng: np.random.Generator, n: int, dim: int = DIM) -> Vectors:
    v = rng.standard_normal((n, dim))
    out: Vectors = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    return out


def user_model(
    rng: np.random.Generator, dim: int = DIM, certainty: float = 0.5, rank: int = 0
) -> UserModel:
    """A model with some taste learnt (as it travels: float16, so that a replay reads the
    same model the logging ranked with), and with a ``rank``, a factor as a population
    prior of co-varying tastes gives one (``relevance.population.for_ranking``)."""
    mean = rng.normal(0.0, 0.6, dim) / np.sqrt(dim)
    var = np.full(dim, PRIOR_VAR * (1.0 - certainty))
    model = model_from_bytes(
        model_bytes(UserModel(mean.astype(np.float32), var.astype(np.float32))), dim
    )
    if rank == 0:
        return model
    factor = (rng.normal(0.0, 0.5, (dim, rank)) * np.sqrt(PRIOR_VAR)).astype(np.float32)
    return UserModel(model.mean, model.var, factor)


def logged_context(
    rng: np.random.Generator,
    n: int,
    count: int,
    *,
    user: UserModel | None = None,
    request_id: str = "r-1",
    retrieved: int | None = None,
    emotion: npt.NDArray[np.float64] | None = None,
    shift: npt.NDArray[np.float64] | None = None,
    rate: tuple[float, float] = (2.0, 30.0),
    seen: tuple[float, float] = (20.0, 400.0),
) -> tuple[RankedContext, Vectors]:
    """A context of ``n`` kept candidates (of ``retrieved``, default ``n``) and their
    vectors, its item posteriors' means drawn from Beta(``rate``) (5% on average by
    default), each learnt from a number of observations uniform in ``seen``."""
    vectors = unit_vectors(rng, n)
    means = rng.beta(*rate, n)
    observed = rng.uniform(*seen, n)
    context = RankedContext(
        request_id=request_id,
        user_id="u-1",
        at_ms=1_767_225_600_000,
        count=count,
        prior_var=PRIOR_VAR,
        user=None if user is None else model_bytes(UserModel(user.mean, user.var)),
        retrieved=n if retrieved is None else retrieved,
        items=tuple(f"it-{i}" for i in range(n)),
        alpha=(1.0 + means * observed).astype(np.float32),
        beta=(1.0 + (1.0 - means) * observed).astype(np.float32),
        shift=(np.zeros(n) if shift is None else shift).astype(np.float32),
        emotion=(np.zeros(n) if emotion is None else emotion).astype(np.float32),
        factor=None if user is None else user.factor,
    )
    return context, vectors
