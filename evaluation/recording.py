"""A decision's context record (``protocol.contexts``) from what its ranker ranked: the
candidates' terms (``relevance.slate.ItemTerms``), each score's shift, what the emotion
rules would add, and the user's model as ranked. One builder for the origin's rankings
(``origin.ranking.contexts``) and an edge's (``edge.ranking.shadow``), so that a replay reads
them alike."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from protocol.contexts import RankedContext, kept_rows
from relevance.slate import OPTIMISM_SD, TIE, Candidates, ItemTerms, mean_scores
from relevance.user_model import UserModel, model_bytes


def context_of(
    terms: ItemTerms,
    shift: npt.NDArray[np.float64],
    emotion: npt.NDArray[np.float64],
    user: UserModel | None,
    item_ids: Sequence[str] | npt.NDArray[np.str_],
    *,
    request_id: str,
    user_id: str,
    at_ms: int,
    count: int,
    prior_var: float,
    retrieved: int | None = None,
) -> tuple[RankedContext, npt.NDArray[np.float32]]:
    """The record of a decision over the candidates ``item_ids`` (aligned with ``terms``),
    keeping the candidates ``protocol.contexts.kept_rows`` names, and the kept candidates'
    unit vectors (what a replay of the record reads; the record itself leaves them out).
    ``retrieved``: how many candidates the decision chose from (default: all of these)."""
    mean, sd = mean_scores(Candidates.with_terms(terms, shift), user)
    rate = terms.alpha / (terms.alpha + terms.beta)
    rows = kept_rows(mean + OPTIMISM_SD * sd, rate, count, tie=TIE)
    record = RankedContext(
        request_id=request_id,
        user_id=user_id,
        at_ms=at_ms,
        count=count,
        prior_var=prior_var,
        user=model_bytes(UserModel(user.mean, user.var)) if user is not None else None,
        retrieved=len(terms) if retrieved is None else retrieved,
        items=tuple(str(item_ids[r]) for r in rows),
        alpha=terms.alpha[rows].astype(np.float32),
        beta=terms.beta[rows].astype(np.float32),
        shift=shift[rows].astype(np.float32),
        emotion=emotion[rows].astype(np.float32),
        factor=None if user is None else user.factor,
    )
    return record, np.asarray(terms.given_vectors[rows], np.float32)
