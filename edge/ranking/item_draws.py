"""The item half of a bank's draws, drawn once per pool and shared by the next banks drawn
over it.

Each run of the policy (``relevance.slate.runs``) draws every pre-selected candidate's
rate from its posterior (a Beta, put on the probit scale) and the user's tastes from
theirs. The item draws do not depend on the user, and they are most of what a bank costs:
64 runs over 100 candidates, 580 µs of Beta draws and their probits in a bank of about
830 µs (measured on this project's 2-core machine, numpy's ``Generator.beta``). A user
whose model changes after most of their page views (a power user interacts after 60% of
them) draws a new bank almost every request.

So an edge draws a pool's item draws once, for all its candidates (a row per run, a
column per candidate, on the probit scale, with the policy's spread), and shares them
among the next ``MAX_USES`` banks drawn over the same pool terms with the same spread and
number of runs. Each bank takes the shared runs in its own random order and adds its own
user draws, so each of its runs is still an independent draw of the policy and its
propensities (the share of its runs) estimate the same thing as before. What differs: the
banks that share item draws are not independent of one another (as the users a segment's
bank serves in turn are not); after ``MAX_USES`` banks, or as soon as the pool's terms
change (a fill, a refresh, the workers' stream of posteriors:
``edge.ranking.live_posteriors``), new item draws are made.

Bounded: the draws of at most ``MAX_POOLS`` pool terms are kept (256 KB each for 64 runs
over 500 candidates), least recently used first out.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from edge.cache.prepared_pool import PreparedPool
from relevance.item_posteriors import probit_draws
from relevance.slate import ItemTerms

Array = npt.NDArray[np.float64]

# Banks that share one pool's item draws, at most. Each takes the 64 runs in its own
# order; the generation (about 2.5 ms for 500 candidates) is spread over them.
MAX_USES = 64
# Pool terms whose draws are kept at most (a pool per segment, device and variant, each
# with its terms brought up to date by the workers' stream).
MAX_POOLS = 32


@dataclass(slots=True, eq=False)
class _Shared:
    terms: ItemTerms  # held, so that its id is not another's while this entry lives
    draws: Array  # (runs, candidates): every candidate's item draw, per run
    uses: int


@dataclass
class DrawCounters:
    drawn: int = 0  # item draws made
    shared: int = 0  # banks that took item draws made for an earlier one


class ItemDraws:
    def __init__(self, *, max_uses: int = MAX_USES, max_pools: int = MAX_POOLS) -> None:
        if max_uses <= 0 or max_pools <= 0:
            raise ValueError(
                f"max_uses and max_pools must be positive, not {max_uses}, {max_pools}"
            )
        self._max_uses = max_uses
        self._max_pools = max_pools
        self._held: OrderedDict[tuple[int, float, int], _Shared] = OrderedDict()
        self.counters = DrawCounters()

    def __len__(self) -> int:
        return len(self._held)

    def for_pool(
        self, pool: PreparedPool, spread: float, runs: int, rng: np.random.Generator
    ) -> Array:
        """``for_bank`` of the pool's terms; for a pool joined with a user's own candidates
        (``PreparedPool.joined``), the draws of each part, shared as the parts are."""
        parts = pool.parts
        if parts is None:
            return self.for_bank(pool.terms, spread, runs, rng)
        base = self.for_bank(parts.base.terms, spread, runs, rng)
        other = self.for_bank(parts.other.terms, spread, runs, rng, counted=False)
        return np.concatenate([base, other[:, parts.rows]], axis=1)

    def for_bank(
        self,
        terms: ItemTerms,
        spread: float,
        runs: int,
        rng: np.random.Generator,
        *,
        counted: bool = True,
    ) -> Array:
        """Item draws of every candidate of ``terms`` for a bank of ``runs`` runs with
        ``spread`` (``probit_draws``, from ``rng``): shared with up to ``max_uses`` banks in
        all, then drawn anew. ``counted``: the counters say whether each bank's pool draws
        were made or shared (not its own candidates' rows besides)."""
        key = (id(terms), spread, runs)
        held = self._held.get(key)
        if held is not None and held.terms is terms and held.uses < self._max_uses:
            held.uses += 1
            self._held.move_to_end(key)
            self.counters.shared += counted
            return held.draws
        draws = probit_draws(terms.alpha, terms.beta, rng, runs, spread)
        self._held[key] = _Shared(terms, draws, uses=1)
        self._held.move_to_end(key)
        self.counters.drawn += counted
        while len(self._held) > self._max_pools:
            self._held.popitem(last=False)
        return draws
