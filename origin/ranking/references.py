"""A ranking by a reference policy (``protocol.policies``: ``random``, ``popular``): the
slate of ``relevance.references`` over the retrieved candidates, shown as the pipeline
shows its own (``Ranked`` items with their propensities and template explanations).

A reference reads nothing of the user's (model, preferences, emotion rules): that is
what it is a reference for. Its explanations are therefore the segment's, never the
user's history; a random pick the posterior means would not have shown is
``exploration``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Protocol

import numpy as np
import numpy.typing as npt

from origin.catalog.item_index import ItemIndex
from origin.ranking.emotion import EmotionalState
from origin.ranking.explanations import Evidence, primary_reason, signals_of
from origin.ranking.pipeline import (
    SOURCE_NAME,
    Ranked,
    RankedInputs,
    Ranking,
    RankingOptions,
    api_source,
    rank,
)
from origin.ranking.profile import UserProfile
from origin.ranking.retrieval import Candidates, Source
from protocol.policies import Kind
from relevance.normal import cdf
from relevance.references import popular_slate, random_slate
from relevance.slate import ItemTerms
from relevance.user_model import UserModel


class Ranker(Protocol):
    """What ranks a request's candidates: ``origin.ranking.pipeline.rank``'s signature."""

    def __call__(
        self,
        index: ItemIndex,
        candidates: Candidates,
        *,
        profile: UserProfile,
        emotion: EmotionalState,
        user: UserModel | None,
        alpha: npt.NDArray[np.float64],
        beta: npt.NDArray[np.float64],
        rng: np.random.Generator,
        options: RankingOptions,
        preferences: Mapping[int, float] | None = None,
        value: npt.NDArray[np.float64] | None = None,
        keep_inputs: bool = False,
    ) -> Ranking: ...


def ranker_for(kind: Kind) -> Ranker:
    """What ranks for a policy of ``kind``: the pipeline, or a reference, which reads of
    the request only its candidates, their posteriors and its count."""
    if kind == "ranker":
        return rank

    def reference(
        index: ItemIndex,
        candidates: Candidates,
        *,
        profile: UserProfile,
        emotion: EmotionalState,
        user: UserModel | None,
        alpha: npt.NDArray[np.float64],
        beta: npt.NDArray[np.float64],
        rng: np.random.Generator,
        options: RankingOptions,
        preferences: Mapping[int, float] | None = None,
        value: npt.NDArray[np.float64] | None = None,
        keep_inputs: bool = False,
    ) -> Ranking:
        ranking = rank_reference(
            kind, index, candidates, alpha=alpha, beta=beta, count=options.count, rng=rng
        )
        if not keep_inputs:
            return ranking
        # What a reference ranked from: the candidates' posteriors, no shift, no user.
        n = len(candidates)
        terms = ItemTerms.of(index.vectors[candidates.rows], alpha, beta)
        return replace(ranking, inputs=RankedInputs(terms, np.zeros(n), np.zeros(n), None))

    return reference


def rank_reference(
    kind: str,
    index: ItemIndex,
    candidates: Candidates,
    *,
    alpha: npt.NDArray[np.float64],
    beta: npt.NDArray[np.float64],
    count: int,
    rng: np.random.Generator,
) -> Ranking:
    """The ``count`` candidates the reference ``kind`` shows (``random`` or ``popular``),
    with their propensities."""
    if kind == "random":
        slate = random_slate(alpha, beta, count, rng)
    elif kind == "popular":
        slate = popular_slate(alpha, beta, count)
    else:
        raise ValueError(f"not a reference policy: {kind!r}")
    m = alpha / (alpha + beta)
    item_sd = np.sqrt(m * (1 - m) / (alpha + beta + 1))
    items = []
    for chosen, score, propensity, explored in zip(
        slate.rows, slate.scores, slate.propensities, slate.exploration, strict=True
    ):
        c = int(chosen)
        row = int(candidates.rows[c])
        source = Source(int(candidates.source[c]))
        exploration = bool(explored)
        evidence = Evidence(
            source=SOURCE_NAME[source],
            exploration=exploration,
            category_name=index.items[row].category_name,
            popularity=float(index.popularity[row]),
            freshness=float(index.freshness[row]),
            category_affinity=False,
            engaged_before=False,
            price_match=False,
        )
        signals = signals_of(evidence, personal=False)
        items.append(
            Ranked(
                row=row,
                score=round(float(cdf(np.array([score]))[0]), 6),
                source="exploration" if exploration else api_source(source),
                exploration=exploration,
                signals=tuple(signals),
                reason=primary_reason(evidence, signals, personal=False),
                rules=(),
                uncertainty=round(float(item_sd[c]), 6),
                propensity=float(propensity),
            )
        )
    return Ranking(items)
