"""The context log: for a sample of the decisions the origin ranks, what the
ranker saw, so that offline evaluation can run another policy on the same context
(``evaluation.replay``) and learn how likely *it* was to show what was shown.

A decision record (``protocol.decisions``) says what was shown and how likely the live
policy was to show it. To weigh that by a candidate policy's probability, the candidate
must be re-run on the decision's inputs: the candidates' item posteriors in the context
cell, the shifts of their scores (stated preferences and an engagement's worth; the emotion
rules apart, so a candidate may switch them), and the user's model. A record holds:

- ``request_id`` (the decision's), ``user_id``, ``at_ms``, ``count`` (slate length);
- ``prior_var``: the prior variance the user's model was learnt under (a candidate with
  another prior strength re-weighs it: ``relevance.user_model.with_prior``);
- ``user``: the user's model (``relevance.user_model.model_bytes``), absent for a
  segment-wide answer; ``factor`` and ``rank``, present when the model as ranked had a
  factor (a population prior of co-varying tastes: ``relevance.population.for_ranking``): its
  (dim, rank) matrix, row-major little-endian float32;
- ``retrieved``: how many candidates retrieval found (a uniformly random policy's
  propensity is one over it);
- per kept candidate: ``items`` (ids), ``alpha``/``beta`` (the Beta posterior the decision
  ranked with), ``shift`` (without the emotion rules) and ``emotion`` (what the rules
  would add). Kept: the best ``KEPT`` by optimistic score, which holds every candidate the
  ranker's pre-selection could take, and the best ``count`` by engagement rate, which the
  most-popular reference shows.

The item vectors are not in the record: they are the catalog's, read by id when
evaluating. Wire form: a msgpack map led by ``"v"``, arrays as little-endian float32 bytes;
decoded strictly (``MalformedMessage`` naming the field).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np
import numpy.typing as npt

from protocol.exceptions import MalformedMessage
from protocol.packed import unpack_map

CONTEXT_VERSION = 1
# Candidates kept by optimistic score: twice the ranker's pre-selection
# (``relevance.slate.PRESELECT``), so that a candidate policy with another prior strength
# still finds the candidates it would pre-select.
KEPT = 200

Array = npt.NDArray[np.float32]
_ARRAYS = ("alpha", "beta", "shift", "emotion")


@dataclass(frozen=True, eq=False)
class RankedContext:
    request_id: str
    user_id: str
    at_ms: int
    count: int
    prior_var: float
    user: bytes | None  # relevance.user_model.model_bytes, or None (segment-wide)
    retrieved: int
    items: tuple[str, ...]
    alpha: Array
    beta: Array
    shift: Array
    emotion: Array
    # The user's model's factor as ranked, (dim, rank); None: none.
    factor: Array | None = None


def encode_context(c: RankedContext) -> bytes:
    doc: dict[str, Any] = {
        "v": CONTEXT_VERSION,
        "request_id": c.request_id,
        "user_id": c.user_id,
        "at_ms": c.at_ms,
        "count": c.count,
        "prior_var": float(c.prior_var),
        "user": c.user,
        "retrieved": c.retrieved,
        "items": list(c.items),
    }
    for name in _ARRAYS:
        doc[name] = np.asarray(getattr(c, name), "<f4").tobytes()
    if c.factor is not None:
        doc["rank"] = int(c.factor.shape[1])
        doc["factor"] = np.asarray(c.factor, "<f4").tobytes()
    packed: bytes = msgpack.packb(doc, use_bin_type=True)
    return packed


def decode_context(raw: bytes) -> RankedContext:
    doc = unpack_map(raw, "context", version=CONTEXT_VERSION)
    for name in ("request_id", "user_id"):
        if not isinstance(doc.get(name), str) or not doc[name]:
            raise MalformedMessage(f"context: field {name!r} is not a non-empty string")
    for name in ("at_ms", "count", "retrieved"):
        if type(doc.get(name)) is not int or doc[name] < 0:
            raise MalformedMessage(f"context: field {name!r} is not a non-negative integer")
    prior_var = doc.get("prior_var")
    if type(prior_var) is not float or not prior_var > 0:
        raise MalformedMessage("context: field 'prior_var' is not a positive float")
    user = doc.get("user")
    if user is not None and not isinstance(user, bytes):
        raise MalformedMessage("context: field 'user' is not bytes")
    factor = _factor(doc, user)
    items = doc.get("items")
    if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
        raise MalformedMessage("context: field 'items' is not a list of ids")
    arrays = {}
    for name in _ARRAYS:
        raw_array = doc.get(name)
        if not isinstance(raw_array, bytes) or len(raw_array) != 4 * len(items):
            raise MalformedMessage(f"context: field {name!r} is not {len(items)} float32")
        array = np.frombuffer(raw_array, "<f4").astype(np.float32)
        if not np.isfinite(array).all():
            raise MalformedMessage(f"context: field {name!r} has a non-finite value")
        arrays[name] = array
    if (arrays["alpha"] <= 0).any() or (arrays["beta"] <= 0).any():
        raise MalformedMessage("context: a Beta posterior that is not positive")
    return RankedContext(
        request_id=doc["request_id"],
        user_id=doc["user_id"],
        at_ms=doc["at_ms"],
        count=doc["count"],
        prior_var=prior_var,
        user=user,
        retrieved=doc["retrieved"],
        items=tuple(items),
        factor=factor,
        **arrays,
    )


def _factor(doc: dict[str, Any], user: bytes | None) -> Array | None:
    """The record's factor, (dim, rank), the dimension the user's model's (4 bytes a
    dimension); None when it has none."""
    rank, raw = doc.get("rank"), doc.get("factor")
    if rank is None and raw is None:
        return None
    if user is None:
        raise MalformedMessage("context: field 'factor' without a user model")
    if type(rank) is not int or rank < 1:
        raise MalformedMessage("context: field 'rank' is not a positive integer")
    dim = len(user) // 4
    if not isinstance(raw, bytes) or len(raw) != 4 * dim * rank:
        raise MalformedMessage(f"context: field 'factor' is not {dim} x {rank} float32")
    factor = np.frombuffer(raw, "<f4").astype(np.float32).reshape(dim, rank)
    if not np.isfinite(factor).all():
        raise MalformedMessage("context: field 'factor' has a non-finite value")
    return factor


def kept_rows(
    optimistic: npt.NDArray[np.float64],
    rate: npt.NDArray[np.float64],
    count: int,
    *,
    tie: float,
) -> npt.NDArray[np.intp]:
    """The candidate rows a record keeps: the best ``KEPT`` by ``optimistic`` score (and
    every candidate within ``tie`` of the last of them) and the best ``count`` by
    engagement ``rate``, in ascending row order.

    Ties are kept whole (``tie``: the ranker's ``relevance.slate.TIE``, which the recorder
    passes): where every candidate is at the prior (a cold start, a segment-wide answer
    over new items) the ranker's pre-selection took some of the tie by their ids' keys
    (``relevance.slate.preselected``), and a replay breaks it the same way only if the
    record holds all of it; the first ``KEPT`` by row would miss what was shown."""
    n = optimistic.shape[0]
    if n > KEPT:
        last = np.partition(optimistic, n - KEPT)[n - KEPT]  # the KEPT-th largest
        best = np.flatnonzero(optimistic >= last - tie)
    else:
        best = np.arange(n)
    popular = np.argsort(-rate, kind="stable")[: min(count, n)]
    out: npt.NDArray[np.intp] = np.union1d(best, popular).astype(np.intp)
    return out
