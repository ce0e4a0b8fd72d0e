"""Ranking a segment's candidate pool (``protocol.pools``) for one user at the edge, with
the code the origin ranks with (``relevance``): the user's model drawn (Thompson sampling
on their own posterior), the pool's item posteriors drawn in the pool's context cell, their
stated preferences (hidden categories out, the others shifted: ``relevance.preferences``),
what each item's engagements are worth (``relevance.item_value``), maximal marginal
relevance by the diversity weight, the request's exclusions, and each shown item's
propensity, re-sampled as the origin does (``relevance.slate.decide``), with the rules the
origin ranks by (``edge.node.build_edge``: the configured exploration rate, diversity
weight, value weight and propensity draws).

What the origin does and an edge cannot: the emotion rules (off by default; they need the
user's session as the origin keeps it), LLM headlines and explanations (a request asking
for explanations is ranked by the origin), and telling a random pick from a trending one
(an item a draw explored is ``exploration`` either way; one the means chose keeps the
source retrieval gave it).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
import orjson

from edge.cache.entry import CachedItem
from edge.cache.prepared_pool import Joined, PreparedPool
from edge.ranking.item_draws import ItemDraws
from protocol.pools import Pool
from relevance.item_value import value_shift
from relevance.normal import cdf
from relevance.preferences import excluded, shifts
from relevance.slate import DRAWS, PRESELECT, Candidates, ItemTerms, Runs, mean_scores, runs
from relevance.user_model import UserModel


@dataclass(frozen=True, slots=True)
class PoolRanking:
    """A slate ranked from a pool: the chosen pool rows best first, each as it will be
    sent, with its drawn score and propensity."""

    rows: tuple[int, ...]
    items: tuple[CachedItem, ...]
    scores: tuple[float, ...]  # the drawn engagement probability, in [0, 1]
    propensities: tuple[float, ...]
    exploration_applied: bool


@dataclass(frozen=True, slots=True)
class Policy:
    """What a ranking of a pool is drawn with besides the pool, the user's held model and the
    request's exclusions: the request's count, the draws' spread (its exploration rate),
    the diversity and value weights, and the rules' pre-selection and propensity draws."""

    count: int
    spread: float
    value_weight: float
    diversity: float = 0.0
    preselect: int = PRESELECT
    draws: int = DRAWS


def rank_pool(
    pool: PreparedPool | Pool,
    model: UserModel,
    *,
    count: int,
    exclude: Collection[str],
    preferences: Mapping[str, float],
    spread: float,
    value_weight: float,
    rng: np.random.Generator,
    diversity: float = 0.0,
    preselect: int = PRESELECT,
    draws: int = DRAWS,
) -> PoolRanking:
    """The best ``count`` of ``pool`` for the user of ``model`` (a bare ``Pool`` is
    prepared for this call alone): the first of ``pool_runs``."""
    prepared = pool if isinstance(pool, PreparedPool) else PreparedPool.of(pool)
    policy = Policy(count, spread, value_weight, diversity, preselect, draws)
    every = pool_runs(prepared, model, policy, exclude=exclude, preferences=preferences, rng=rng)
    return ranking_of(prepared, every, 0)


@dataclass(frozen=True, slots=True)
class PoolCandidates:
    """The pool's candidates as a ranking for one user reads them: the rows taking part
    (None: all), their terms and each score's shift (stated preference and an
    engagement's worth)."""

    rows: npt.NDArray[np.intp] | None
    terms: ItemTerms
    shift: npt.NDArray[np.float64]


def pool_candidates(
    prepared: PreparedPool,
    model: UserModel | None,
    policy: Policy,
    *,
    exclude: Collection[str],
    preferences: Mapping[str, float],
) -> PoolCandidates:
    """What ``pool_runs`` ranks, and what the context log records of it
    (``edge.ranking.shadow``)."""
    # Per category, then per row: the user's preference, and which rows take part.
    shift = shifts(prepared.categories, preferences)[prepared.category_codes]
    rows = _taking_part(prepared, exclude, excluded(preferences))
    terms, value = prepared.terms, prepared.value
    if rows is not None:
        terms, shift, value = terms.take(rows), shift[rows], value[rows]
    if policy.value_weight > 0 and prepared.valued and bool(np.any(value != 1.0)):
        mean, _ = mean_scores(Candidates.with_terms(terms, shift), model)
        shift = shift + value_shift(mean, value, policy.value_weight)
    return PoolCandidates(rows, terms, shift)


def pool_runs(
    prepared: PreparedPool,
    model: UserModel | None,
    policy: Policy,
    *,
    exclude: Collection[str],
    preferences: Mapping[str, float],
    rng: np.random.Generator,
    item_draws: ItemDraws | None = None,
) -> Runs:
    """Every run of the policy over ``prepared`` for the user of ``model`` (None: the
    segment's own ranking, nobody's model) (``relevance.slate.runs``), their rows the
    pool's; the item draws shared with other banks over the pool when ``item_draws``
    holds them (``edge.ranking.item_draws``)."""
    taking = pool_candidates(prepared, model, policy, exclude=exclude, preferences=preferences)
    rows, terms, shift = taking.rows, taking.terms, taking.shift
    shared = None
    if item_draws is not None and policy.spread > 0:
        shared = item_draws.for_pool(prepared, policy.spread, 1 + policy.draws, rng)
        shared = shared if rows is None else shared[:, rows]
    every = runs(
        Candidates.with_terms(terms, shift),
        model,
        policy.count,
        rng,
        spread=policy.spread,
        diversity=policy.diversity,
        preselect=policy.preselect,
        draws=policy.draws,
        item_draws=shared,
    )
    return every if rows is None else replace(every, rows=rows[every.rows])


@dataclass(frozen=True, slots=True, eq=False)
class Drawn:
    """Every run of a policy over a pool (``pool_runs``) with what an answer shows of each
    computed for all of them at once: each shown item's engagement probability and its
    propensity (the share of all the runs that put it at its position). A bank of runs
    (``edge.ranking.run_banks``) serves its runs from this in turn, each request paying only
    for its own items' rendering."""

    runs: Runs
    probabilities: npt.NDArray[np.float64]  # (runs, count): the drawn scores' Φ
    propensities: npt.NDArray[np.float64]  # (runs, count)
    # Where the runs' rows are when they were drawn over a pool joined with the user's own
    # candidates (``edge.ranking.own_candidates``): the pool's, then some of another's
    # (held rather than the joined pool, whose terms would cost a bank a megabyte).
    parts: Joined | None = None

    @classmethod
    def of(cls, runs: Runs, over: PreparedPool | None = None) -> Drawn:
        """``runs`` drawn over ``over`` (when it may be a joined pool: its parts are kept)."""
        parts = None if over is None else over.parts
        return cls(runs, cdf(runs.scores), runs.every_propensity(), parts)

    def __len__(self) -> int:
        return len(self.runs)

    @property
    def nbytes(self) -> int:
        own = 0 if self.parts is None else int(self.parts.rows.nbytes)
        return self.runs.nbytes + int(self.probabilities.nbytes + self.propensities.nbytes) + own


def ranking_of(prepared: PreparedPool, every: Runs | Drawn, run: int) -> PoolRanking:
    """Run ``run`` of ``every`` (``pool_runs`` of ``prepared``, or of the pool ``every``
    says it was drawn over) as the answer shows it, its propensities estimated from all the
    runs."""
    drawn = every if isinstance(every, Drawn) else Drawn.of(every, prepared)
    rows = drawn.runs.rows[run].tolist()
    scores = [round(p, 6) for p in drawn.probabilities[run].tolist()]
    explored = drawn.runs.exploration[run].tolist()
    parts = drawn.parts
    items = tuple(
        _item(prepared, row, score, ex) if parts is None else _item(*_part(parts, row), score, ex)
        for row, score, ex in zip(rows, scores, explored, strict=True)
    )
    return PoolRanking(
        rows=tuple(rows),
        items=items,
        scores=tuple(scores),
        propensities=tuple(drawn.propensities[run].tolist()),
        exploration_applied=any(explored),
    )


def _taking_part(
    prepared: PreparedPool, exclude: Collection[str], hidden: Collection[str]
) -> npt.NDArray[np.intp] | None:
    """The rows neither excluded by the request nor of a hidden category, in pool order;
    None when that is all of them."""
    dropped = [row for i in exclude for row in prepared.rows_of.get(i, ())]
    codes = [k for k, c in enumerate(prepared.categories) if c in hidden]
    if not dropped and not codes:
        return None
    keep = np.ones(len(prepared), bool)
    keep[dropped] = False
    if codes:
        keep &= ~np.isin(prepared.category_codes, codes)
    return np.flatnonzero(keep)


def _part(parts: Joined, row: int) -> tuple[PreparedPool, int]:
    """The pool and row a joined pool's ``row`` comes from."""
    n = len(parts.base)
    return (parts.base, row) if row < n else (parts.other, int(parts.rows[row - n]))


def _item(prepared: PreparedPool, row: int, score: float, explored: bool) -> CachedItem:
    """The item as the origin's answer shows it (``RankedItem`` but rank and explanation);
    an item a draw explored is ``exploration``, one the means chose keeps its source."""
    source = b"exploration" if explored else prepared.sources[row]
    members = b'%b%b,"source":"%b","metadata":%b' % (
        prepared.heads[row],
        orjson.dumps(score),
        source,
        prepared.pool.metadata[row],
    )
    return CachedItem(prepared.pool.item_ids[row], members, b"null")
