"""A candidate policy (``protocol.policies``) re-run on a logged decision's context
(``protocol.contexts``): how likely it was to put each shown item where the live policy put
it, and the slates it would have shown instead.

The ranker (``kind`` ``ranker``) is re-run by the same code that ranks live
(``relevance.slate.runs``) on the logged candidates: their item posteriors and score shifts
as logged, the emotion rules added when the candidate has them on, the user's logged
model re-weighed to the candidate's prior strength (``relevance.user_model.with_prior``),
``draws`` + 1 times; a shown item's propensity is the share of runs that put it at its
position (at least one run's share when one did; 0 when none did). A shown item the record
did not keep (below every kept candidate's optimistic score) is one the candidate's
pre-selection could not take: propensity 0.

The references are exact: ``random`` puts any of the ``retrieved`` candidates at a
position with probability 1 / ``retrieved``; ``popular`` shows the best ``count`` by the
engagement rate's posterior mean, each with probability 1 at its position.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from protocol.contexts import RankedContext
from protocol.policies import PolicyConfig
from relevance.slate import PRESELECT, Candidates, diversity_for, runs, spread_for, tie_keys
from relevance.user_model import UserModel, model_from_bytes, with_prior

Array = npt.NDArray[np.float64]
Rows = npt.NDArray[np.intp]

DRAWS = 255  # plus one: 256 runs, a propensity's resolution 1/256
MISSING = -1  # a shown item the context did not keep


@dataclass(frozen=True, slots=True)
class Replayed:
    """A candidate on one decision, aligned with the shown positions."""

    propensity: Array  # (K,) P(the shown item at its position | the candidate)
    # (runs, K) the candidate's slates as rows of the context's kept items (``MISSING``
    # where a uniformly random slate's pick is not among them); None for ``random``.
    slates: Rows | None


def rows_of(context: RankedContext, shown: list[str]) -> Rows:
    """Each shown item's row among the context's kept items, ``MISSING`` when not kept."""
    where = {item: row for row, item in enumerate(context.items)}
    return np.array([where.get(item, MISSING) for item in shown], np.intp)


def replay(
    context: RankedContext,
    vectors: npt.NDArray[np.float32],
    shown: Rows,
    policy: PolicyConfig,
    rng: np.random.Generator,
    *,
    draws: int = DRAWS,
) -> Replayed:
    """``policy`` on ``context`` (``vectors``: the kept items' unit vectors, by row), for
    the slate that showed the rows ``shown`` (``rows_of``) at positions 1..K."""
    k = shown.shape[0]
    if policy.kind == "random":
        return Replayed(np.full(k, 1.0 / max(context.retrieved, 1)), None)
    alpha = context.alpha.astype(np.float64)
    beta = context.beta.astype(np.float64)
    if policy.kind == "popular":
        best = np.argsort(-(alpha / (alpha + beta)), kind="stable")[: context.count]
        p = np.zeros(k)
        width = min(k, best.shape[0])
        p[:width] = best[:width] == shown[:width]
        return Replayed(p, best[None, :].astype(np.intp))
    shift = context.shift.astype(np.float64)
    if policy.emotion_rules:
        shift = shift + context.emotion.astype(np.float64)
    user = None
    if context.user is not None:
        dim = vectors.shape[1]
        logged = model_from_bytes(context.user, dim)
        if context.factor is not None:
            logged = UserModel(logged.mean, logged.var, context.factor)
        user = with_prior(logged, context.prior_var, policy.user_prior_scale / dim)
    ran = runs(
        Candidates(vectors, alpha, beta, shift, keys=tie_keys(context.items)),
        user,
        context.count,
        rng,
        spread=spread_for(policy.exploration_weight),
        diversity=diversity_for(policy.diversity_weight),
        preselect=PRESELECT,
        draws=draws,
    )
    width = min(k, ran.rows.shape[1])
    p = np.zeros(k)
    p[:width] = (ran.rows[:, :width] == shown[None, :width]).mean(axis=0)
    p[shown == MISSING] = 0.0
    return Replayed(p, ran.rows)
