"""The context log's record of a decision the origin ranked (``protocol.contexts``): what
offline evaluation re-runs a candidate policy on."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from origin.ranking.pipeline import RankedInputs
from protocol.contexts import RankedContext, kept_rows
from relevance.slate import OPTIMISM_SD, mean_scores
from relevance.slate import Candidates as Scored
from relevance.user_model import model_bytes


def context_record(
    inputs: RankedInputs,
    item_ids: npt.NDArray[np.str_] | list[str],
    *,
    request_id: str,
    user_id: str,
    at_ms: int,
    count: int,
    prior_var: float,
) -> tuple[RankedContext, npt.NDArray[np.float32]]:
    """The record of a decision over the candidates ``item_ids`` (aligned with ``inputs``),
    keeping the candidates ``protocol.contexts.kept_rows`` names, and the kept candidates'
    unit vectors (what a replay of the record reads; the record itself leaves them out)."""
    terms = inputs.terms
    mean, sd = mean_scores(Scored.with_terms(terms, inputs.shift), inputs.user)
    rows = kept_rows(mean + OPTIMISM_SD * sd, terms.alpha / (terms.alpha + terms.beta), count)
    record = RankedContext(
        request_id=request_id,
        user_id=user_id,
        at_ms=at_ms,
        count=count,
        prior_var=prior_var,
        user=model_bytes(inputs.user) if inputs.user is not None else None,
        retrieved=len(terms),
        items=tuple(str(item_ids[r]) for r in rows),
        alpha=terms.alpha[rows].astype(np.float32),
        beta=terms.beta[rows].astype(np.float32),
        shift=inputs.shift[rows].astype(np.float32),
        emotion=inputs.emotion[rows].astype(np.float32),
    )
    return record, np.asarray(terms.given_vectors[rows], np.float32)
