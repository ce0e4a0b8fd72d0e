"""The context log's record of a decision the origin ranked (``protocol.contexts``): what
offline evaluation re-runs a candidate policy on (``evaluation.recording`` builds it)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from evaluation.recording import context_of
from origin.ranking.pipeline import RankedInputs
from protocol.contexts import RankedContext


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
    """The record of a decision over the candidates ``item_ids`` (aligned with ``inputs``)
    and the kept candidates' unit vectors."""
    return context_of(
        inputs.terms,
        inputs.shift,
        inputs.emotion,
        inputs.user,
        item_ids,
        request_id=request_id,
        user_id=user_id,
        at_ms=at_ms,
        count=count,
        prior_var=prior_var,
    )
