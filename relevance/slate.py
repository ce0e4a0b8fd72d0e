"""One decision: which candidates fill a slate, in which order, and how likely each shown
(item, position) was under the policy that chose it.

A candidate's score is on the probit scale, where the two terms meet:

    score_i = b̃_i + θ̃ · x_i + shift_i

b̃_i a draw of the item's engagement rate (``relevance.item_posteriors``), θ̃ a draw of the
user's posterior (``relevance.user_model``; absent for a segment-wide answer, where the
item term alone ranks), shift_i a stated preference. Thompson sampling: the slate is the
best ``count`` by drawn score, so each term counts by its certainty, and exploration is
what the draws' spread makes of it; ``spread`` scales that spread (0: the posterior means,
no exploration). With ``diversity`` > 0 the slate is filled greedily by score minus
``diversity`` times the candidate's largest cosine similarity to the items already chosen
(maximal marginal relevance): relevance-weighted, so a strongly preferred item keeps its
place while near-duplicates of it give way.

Only the ``preselect`` best candidates by optimistic score (mean + 2 standard deviations)
take part: the others could almost never be drawn into a slate, and leaving them out keeps
a decision cheap. That pre-selection is part of the policy, so it must not depend on the
order candidates come in nor on the rounding of their vectors: candidates tied with the last
place (within ``TIE``) are taken by a key of their item id, the same wherever the decision
is made or replayed (``preselected``, ``tie_keys``).

What depends on the candidates alone (their vectors as float64 and squared, each item
term's mean and variance on the probit scale: ``ItemTerms``) can be computed once for a
candidate set and handed to every decision over it (``Candidates.with_terms``): an edge
ranks many users' requests from one pool. A decision over candidates without them computes
them itself; either way the arithmetic is the same, so are the slates.

Propensities: the same policy is run ``draws`` more times on independent draws; an item's
propensity at its position is the share of all runs (the one served included) that put it
there. ``runs`` returns every run (``Runs``), ``Runs.slate`` any one of them with its
propensities so estimated, and ``decide`` is ``runs(...).slate(0)``: an edge that serves a
user's later requests from the other runs (``edge.ranking.run_banks``) serves the same policy by
the same code. Estimated so, a propensity is at least 1 / (draws + 1): an estimator that weights
by its inverse should read small ones as "rarely chosen", not as exact. Items and
positions of a deterministic policy (``spread`` 0) get propensity 1.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from relevance.item_posteriors import probit_draws, probit_means
from relevance.normal import pdf
from relevance.user_model import UserModel
from relevance.user_model import draws as user_draws

Rows = npt.NDArray[np.intp]
Array = npt.NDArray[np.float64]
Floats = npt.NDArray[np.floating[Any]]
Bools = npt.NDArray[np.bool_]
Keys = npt.NDArray[np.uint32]

PRESELECT = 100
# Standard deviations above its mean of a candidate's optimistic score (``optimistic``).
# With the item term's variance by the delta method (``ItemTerms``), a barely-seen item of
# a low rate scores far above what its Beta posterior allows (Beta(0.23, 12.3), 1.8%: like
# a 32% item), and that is the product's exploration at the shipped exploration rate: it
# decides which candidates the draws rank. Measured on benchmarks.learning's family (seed
# 1, commit 3c2c2ea): the rate two of its own deviations up instead (9.1% for that item)
# made the final tenth 4-24 points worse in every shop (median 80.9% against 62.7%); 3 or 4
# deviations instead of 2 moved two tuning shops within one seed's noise.
OPTIMISM_SD = 2.0
# Optimistic scores this close to the pre-selection's last place count as tied with it
# (``preselected``): far below what a draw moves a score (tenths on the probit scale), far
# above the rounding between an edge's float16 vectors and the catalog's float32 ones that
# a replay reads (under 1e-6 at a cold start, about 1e-4 for a user with a strong model).
TIE = 1e-3
DRAWS = 63  # plus the served run: 64 runs
# The exploration rate of plain Thompson sampling: the draws' spread is the posteriors'.
PLAIN_THOMPSON_RATE = 0.3
# Maximal marginal relevance: diversity weight 1 costs an exact duplicate this much.
DIVERSITY_SCALE = 1.0


def spread_for(exploration_rate: float) -> float:
    """The draws' spread for an exploration rate (the API's ``exploration_rate``, or the
    configured default): ``PLAIN_THOMPSON_RATE`` is the posteriors' own spread, 0 ranks by
    the means, and no rate spreads the draws more than 1 / ``PLAIN_THOMPSON_RATE``."""
    return min(exploration_rate / PLAIN_THOMPSON_RATE, 1.0 / PLAIN_THOMPSON_RATE)


def diversity_for(diversity_weight: float) -> float:
    """``decide``'s ``diversity`` for a diversity weight (the API's ``diversity_weight``,
    or the configured default)."""
    return DIVERSITY_SCALE * diversity_weight


@dataclass(frozen=True, eq=False)
class ItemTerms:
    """What a decision reads of its candidates that no user or request changes, aligned by
    row: computed once per candidate set (``of``). The vectors' terms, which only a user's
    term reads, are computed when first read."""

    given_vectors: Floats  # (n, dim), unit length, as given
    alpha: Array  # the item's Beta posterior
    beta: Array
    mean: Array  # the item term's posterior mean on the probit scale, Φ⁻¹ of the rate's
    var: Array  # its variance there, by the delta method (see ``OPTIMISM_SD``)
    # Each candidate's ``tie_keys`` (None: ties are taken whole, ``preselected``).
    keys: Keys | None = None

    @classmethod
    def of(
        cls, vectors: Floats, alpha: Floats, beta: Floats, keys: Keys | None = None
    ) -> ItemTerms:
        a = np.asarray(alpha, np.float64)
        b = np.asarray(beta, np.float64)
        mean = probit_means(a, b)
        m = a / (a + b)
        var = m * (1 - m) / (a + b + 1) / np.maximum(pdf(mean), 1e-6) ** 2
        return cls(vectors, a, b, mean, var, keys)

    def __len__(self) -> int:
        return int(self.alpha.shape[0])

    @cached_property
    def vectors(self) -> Array:
        """The vectors as float64, what the user's term is computed in."""
        return self.given_vectors.astype(np.float64)

    @cached_property
    def squares(self) -> Array:
        """``vectors`` squared: what the user term's variance weighs."""
        out: Array = self.vectors * self.vectors
        return out

    def with_vector_terms(self) -> ItemTerms:
        """These terms, the vectors' computed now rather than when first read."""
        _ = self.squares
        return self

    def joined(self, other: ItemTerms) -> ItemTerms:
        """These terms, then ``other``'s (the vectors' terms joined when these hold them,
        computed for ``other``'s rows if need be)."""
        keys = None
        if self.keys is not None and other.keys is not None:
            keys = np.concatenate([self.keys, other.keys])
        out = ItemTerms(
            np.concatenate([self.given_vectors, other.given_vectors]),
            np.concatenate([self.alpha, other.alpha]),
            np.concatenate([self.beta, other.beta]),
            np.concatenate([self.mean, other.mean]),
            np.concatenate([self.var, other.var]),
            keys,
        )
        for name in ("vectors", "squares"):
            if name in self.__dict__:
                out.__dict__[name] = np.concatenate([self.__dict__[name], getattr(other, name)])
        return out

    def take(self, rows: Rows) -> ItemTerms:
        """The terms of ``rows`` alone, in that order (the vectors' terms taken along, when
        computed already)."""
        taken = ItemTerms(
            self.given_vectors[rows],
            self.alpha[rows],
            self.beta[rows],
            self.mean[rows],
            self.var[rows],
            None if self.keys is None else self.keys[rows],
        )
        for name in ("vectors", "squares"):
            if name in self.__dict__:
                taken.__dict__[name] = self.__dict__[name][rows]
        return taken


@dataclass(frozen=True, slots=True)
class Candidates:
    """What a decision needs of each candidate, aligned by row."""

    vectors: Floats  # (n, dim), unit length
    alpha: Array  # the item's Beta posterior
    beta: Array
    shift: Array  # added to the score (stated preferences), probit units
    # The candidates' ``ItemTerms`` when computed ahead (``with_terms``); else each
    # decision computes them.
    terms: ItemTerms | None = field(default=None, kw_only=True, repr=False, compare=False)
    # Each candidate's ``tie_keys``, when ``terms`` are not given.
    keys: Keys | None = field(default=None, kw_only=True, repr=False, compare=False)

    @classmethod
    def with_terms(cls, terms: ItemTerms, shift: Array) -> Candidates:
        """The candidates of ``terms``, each moved by its ``shift``."""
        return cls(terms.given_vectors, terms.alpha, terms.beta, shift, terms=terms)

    def __len__(self) -> int:
        return int(self.alpha.shape[0])

    def item_terms(self) -> ItemTerms:
        if self.terms is not None:
            return self.terms
        return ItemTerms.of(self.vectors, self.alpha, self.beta, self.keys)


@dataclass(frozen=True, slots=True)
class Slate:
    rows: Rows  # candidate rows, best first
    scores: Array  # their drawn scores (probit scale)
    propensities: Array  # P(this row at this position | the policy)
    exploration: Bools  # not in the posterior means' top ``count``

    def __len__(self) -> int:
        return int(self.rows.shape[0])


def mean_scores(c: Candidates, user: UserModel | None) -> tuple[Array, Array]:
    """Each candidate's posterior mean score and its standard deviation (the user term's
    plus the item term's, by the delta method on the probit scale)."""
    return _mean_scores(c.item_terms(), c.shift, user)


def _mean_scores(terms: ItemTerms, shift: Array, user: UserModel | None) -> tuple[Array, Array]:
    mean = terms.mean + shift
    var = terms.var
    if user is not None:
        mean = mean + terms.vectors @ user.mean.astype(np.float64)
        var = var + terms.squares @ user.var.astype(np.float64)
        if user.factor is not None:
            along = terms.vectors @ user.factor.astype(np.float64)
            var = var + (along * along).sum(axis=1)
    return mean, np.sqrt(var)


def optimistic(c: Candidates, user: UserModel | None) -> Array:
    """Each candidate's optimistic score, mean + ``OPTIMISM_SD`` standard deviations: what
    the pre-selection keeps the best of (and an origin's pool, ``origin.ranking.pools``)."""
    mean, sd = mean_scores(c, user)
    out: Array = mean + OPTIMISM_SD * sd
    return out


@dataclass(frozen=True, slots=True)
class Runs:
    """Every run of one decision's policy (``runs``), each on its own independent draws,
    aligned by run: run 0 is the one ``decide`` serves, and any run is a draw of the
    policy as good as another (an edge serves a user's later requests from the others:
    ``edge.ranking.run_banks``)."""

    rows: Rows  # (runs, count): each run's chosen candidate rows, best first
    scores: Array  # (runs, count): their drawn scores (probit scale)
    exploration: Bools  # (runs, count): not in the posterior means' top ``count``

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes + self.scores.nbytes + self.exploration.nbytes)

    def propensities(self, run: int) -> Array:
        """For each item ``run`` shows, the share of all these runs (``run`` included)
        that put it at its position: its propensity there under the policy."""
        out: Array = (self.rows == self.rows[run][None, :]).mean(axis=0)
        return out

    def every_propensity(self) -> Array:
        """(runs, count): every run's ``propensities`` at once, by counting each (row,
        position) pair over all the runs."""
        runs, count = self.rows.shape
        pairs = self.rows * count + np.arange(count)
        out: Array = np.bincount(pairs.ravel())[pairs] / runs
        return out

    def slate(self, run: int) -> Slate:
        """``run``'s slate, its propensities estimated from all the runs."""
        return Slate(
            rows=self.rows[run],
            scores=self.scores[run],
            propensities=self.propensities(run),
            exploration=self.exploration[run],
        )


def decide(
    c: Candidates,
    user: UserModel | None,
    count: int,
    rng: np.random.Generator,
    *,
    spread: float = 1.0,
    diversity: float = 0.0,
    preselect: int = PRESELECT,
    draws: int = DRAWS,
) -> Slate:
    """The slate of up to ``count`` candidates, and each shown item's propensity: the first
    of ``runs``, its propensities estimated from all of them."""
    return runs(
        c, user, count, rng, spread=spread, diversity=diversity, preselect=preselect, draws=draws
    ).slate(0)


def runs(
    c: Candidates,
    user: UserModel | None,
    count: int,
    rng: np.random.Generator,
    *,
    spread: float = 1.0,
    diversity: float = 0.0,
    preselect: int = PRESELECT,
    draws: int = DRAWS,
    item_draws: Array | None = None,
) -> Runs:
    """The policy run 1 + ``draws`` times on independent draws (once when ``spread`` is
    0: it is deterministic then), each run's slate of up to ``count`` candidates.

    ``item_draws``: the candidates' item draws made beforehand (``probit_draws`` of every
    candidate with this ``spread``, one row per run, as ``edge.ranking.item_draws`` shares
    them among banks), taken in a random order of their rows; else drawn here."""
    n = len(c)
    count = min(count, n)
    if count == 0:
        return Runs(np.empty((1, 0), np.intp), np.empty((1, 0)), np.empty((1, 0), bool))
    terms = c.item_terms()
    mean, sd = _mean_scores(terms, c.shift, user)
    pool = preselected(mean + OPTIMISM_SD * sd, min(n, max(preselect, count)), terms.keys)
    times = 1 + (draws if spread > 0 else 0)
    if item_draws is not None and spread > 0:
        if item_draws.shape != (times, n):
            raise ValueError(f"item draws of shape {item_draws.shape}, not {(times, n)}")
        noise = item_draws[np.ix_(rng.permutation(times), pool)]
    else:
        noise = probit_draws(terms.alpha[pool], terms.beta[pool], rng, times, spread)
    scores = noise + c.shift[pool]
    if user is not None:
        thetas = user_draws(user, rng, times, spread) if spread > 0 else user.mean[None, :]
        scores = scores + (thetas.astype(np.float64) @ terms.vectors[pool].T)
    similarity = _similarity(terms.vectors[pool]) if diversity > 0 else None
    chosen = _choose(scores, count, diversity, similarity)  # (runs, count), pool indices
    greedy = _choose(mean[pool][None, :], count, diversity, similarity)[0]
    in_greedy = np.zeros(pool.shape[0], bool)
    in_greedy[greedy] = True
    return Runs(
        rows=pool[chosen],
        scores=scores[np.arange(chosen.shape[0])[:, None], chosen],
        exploration=~in_greedy[chosen],
    )


def preselected(optimistic: Array, k: int, keys: Keys | None = None) -> Rows:
    """The rows of the ``k`` best ``optimistic`` scores, best first; those within ``TIE``
    of the k-th are tied with it, and the tie is broken by ``keys`` (``tie_keys``: the
    smallest first), or taken whole without them.

    Where candidates are alike at the prior (a new user, new items) their scores differ by
    rounding alone, and a cut at exactly ``k`` would take whichever rounding and row order
    favour: a replay of the decision (``evaluation.replay``, over the record's rows and the
    catalog's float32 vectors, where an edge ranked with float16 ones) would take others,
    and find the shown items impossible. A key of the item id takes the same ones
    everywhere; taken whole, a 500-item pool at the prior costs about three times a
    100-item pre-selection."""
    n = optimistic.shape[0]
    if k >= n:
        return np.argsort(-optimistic, kind="stable")
    last = np.partition(optimistic, n - k)[n - k]  # the k-th largest
    if keys is None:
        rows = np.flatnonzero(optimistic >= last - TIE)
    else:
        above = np.flatnonzero(optimistic > last + TIE)  # fewer than k: the tie fills up
        tied = np.flatnonzero(np.abs(optimistic - last) <= TIE)
        taken = tied[np.argsort(keys[tied], kind="stable")[: k - above.shape[0]]]
        rows = np.concatenate([above, taken])
    out: Rows = rows[np.argsort(-optimistic[rows], kind="stable")]
    return out


def tie_keys(item_ids: Iterable[str]) -> Keys:
    """What breaks a tie at the pre-selection's last place (``preselected``): a hash of
    each item's id (CRC-32), the same at the origin, at an edge and in a replay."""
    return np.fromiter((zlib.crc32(i.encode()) for i in item_ids), np.uint32)


def _similarity(unit: Array) -> Array:
    out: Array = np.clip(unit @ unit.T, 0.0, 1.0)
    return out


def _choose(scores: Array, count: int, diversity: float, similarity: Array | None) -> Rows:
    """Per row of ``scores`` (one run each), the ``count`` chosen columns in order."""
    runs, n = scores.shape
    if similarity is None:
        part = np.argpartition(-scores, count - 1, axis=1)[:, :count]
        order = np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1, kind="stable")
        out: Rows = np.take_along_axis(part, order, axis=1)
        return out
    gains = scores.copy()
    closest = np.zeros((runs, n))
    picked = np.empty((runs, count), np.intp)
    every = np.arange(runs)
    for j in range(count):
        pick = np.argmax(gains - diversity * closest, axis=1)
        picked[:, j] = pick
        gains[every, pick] = -np.inf
        closest = np.maximum(closest, similarity[pick])
    return picked
