"""Textbook policies ``benchmarks.learning`` runs beside the product, in process.

Each sees only the catalog (ids and visible vectors) and its own outcomes (the clicks:
whatever else a shop reports, they learn from clicks alone), never the world's hidden
tastes, and each is given the configuration chosen for the world it runs in
(``benchmarks.learning --tune``; the grids and choices are in
``benchmarks.learning_policies``).

Position bias: every learner here knows the examination curve of the position-based model
(``examine(p) = 1 / p^0.7``, the world's own; PBM-TS, Lagree et al. 2016, assumes it known
too) and uses it the same way: a click at any position is a success, and a shown item
without a click counts as ``examine(p)`` of a failure, not a whole one, because a user who
never looked at position 10 said nothing about its item. Counting whole failures would
estimate ``examine(p) x attract`` instead of ``attract`` and punish whatever was shown low,
which is where exploration puts items. The linear model says the same thing in its own
terms: it regresses the click on ``examine(p) x features``.

- ``RandomSlates``: k distinct items uniformly at random; the floor.
- ``BetaThompson``: one Beta posterior per item for everyone (non-personalised); the slate
  is the top k of one draw per item.
- ``EpsilonGreedy``: the top k by each item's posterior-mean click rate; each position is
  replaced, with probability epsilon (0.1), by an item drawn uniformly from the rest.
- ``LinearThompson``: per user, Bayesian linear regression of the click on the visible
  vector and an intercept, shrunk toward a population model fitted on everyone's
  outcomes; the slate is the top k of one posterior draw. It has no per-item term, so an
  item's hidden quality is out of its reach (VW's item-id features can learn it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from benchmarks.click_model import Flags, Matrix, Outcome, Rows, Vector, top_k
from benchmarks.shop_world import Catalog, Request


def _ids(catalog: Catalog, rows: Rows) -> list[str]:
    return [catalog.item_ids[int(r)] for r in rows]


def slate_rows(index_of: dict[str, int], slate: Sequence[str]) -> Rows:
    return np.fromiter((index_of[i] for i in slate), np.intp, len(slate))


class RandomSlates:
    """Uniformly random slates: what no learning earns."""

    name = "random"

    def __init__(self, catalog: Catalog, rng: np.random.Generator) -> None:
        self._catalog = catalog
        self._rng = rng

    def configuration(self) -> dict[str, Any]:
        return {"slate": "k distinct items uniformly at random"}

    async def slate(self, request: Request) -> list[str]:
        n = len(self._catalog.item_ids)
        return _ids(self._catalog, self._rng.choice(n, request.count, replace=False))

    async def learn(self, request: Request, slate: Sequence[str], outcome: Outcome) -> None:
        return None

    async def aclose(self) -> None:
        return None


def count_outcome(
    successes: Vector, failures: Vector, rows: Rows, clicked: Flags, examine: Vector
) -> None:
    """Add a slate's outcome to per-item counts in place: a click is one success; a shown
    item without one is ``examine(position)`` of a failure (module docstring)."""
    successes[rows] += clicked
    failures[rows] += np.where(clicked, 0.0, examine[: len(rows)])


@dataclass(frozen=True, slots=True)
class BetaPrior:
    """Pseudo-counts every item starts with: Beta(alpha, beta)."""

    alpha: float = 1.0
    beta: float = 1.0


class ItemCounts:
    """Per-item successes and examination-weighted failures, over everyone."""

    def __init__(self, catalog: Catalog, examine: Vector, prior: BetaPrior) -> None:
        n = len(catalog.item_ids)
        self.catalog = catalog
        self.examine = examine
        self.prior = prior
        self.successes = np.zeros(n)
        self.failures = np.zeros(n)
        self.index_of = {item_id: i for i, item_id in enumerate(catalog.item_ids)}

    def observe(self, slate: Sequence[str], outcome: Outcome) -> None:
        rows = slate_rows(self.index_of, slate)
        count_outcome(self.successes, self.failures, rows, outcome.clicked, self.examine)

    @property
    def alpha(self) -> Vector:
        return self.prior.alpha + self.successes

    @property
    def beta(self) -> Vector:
        return self.prior.beta + self.failures


class BetaThompson:
    """Global Beta-Bernoulli Thompson sampling per item (non-personalised)."""

    name = "beta_ts"

    def __init__(
        self, catalog: Catalog, examine: Vector, rng: np.random.Generator, prior: BetaPrior
    ) -> None:
        self.counts = ItemCounts(catalog, examine, prior)
        self._rng = rng

    def configuration(self) -> dict[str, Any]:
        return {
            "prior": asdict(self.counts.prior),
            "success": "click",
            "failure": "shown without a click, weighted by examine(position)",
            "slate": "top k of one Beta draw per item",
        }

    async def slate(self, request: Request) -> list[str]:
        draws = self._rng.beta(self.counts.alpha, self.counts.beta)
        return _ids(self.counts.catalog, top_k(draws, request.count))

    async def learn(self, request: Request, slate: Sequence[str], outcome: Outcome) -> None:
        self.counts.observe(slate, outcome)

    async def aclose(self) -> None:
        return None


def explore_positions(rng: np.random.Generator, greedy: Rows, items: int, epsilon: float) -> Rows:
    """Replace each position, with probability ``epsilon``, by an item drawn uniformly from
    those not already in the slate."""
    slate = greedy.copy()
    for position in np.flatnonzero(rng.random(len(slate)) < epsilon):
        taken = set(slate.tolist())
        choice = int(rng.integers(items - len(taken)))
        # The choice-th row that is not taken: step over the taken rows at or below it.
        for row in sorted(taken):
            if row <= choice:
                choice += 1
        slate[position] = choice
    return slate


class EpsilonGreedy:
    """Epsilon-greedy on per-item click rates (non-personalised)."""

    name = "epsilon_greedy"

    def __init__(
        self,
        catalog: Catalog,
        examine: Vector,
        rng: np.random.Generator,
        prior: BetaPrior,
        epsilon: float = 0.1,
    ) -> None:
        self.counts = ItemCounts(catalog, examine, prior)
        self._rng = rng
        self._epsilon = epsilon

    def configuration(self) -> dict[str, Any]:
        return {
            "epsilon": self._epsilon,
            "prior": asdict(self.counts.prior),
            "estimate": "posterior mean (alpha + clicks) / (alpha + beta + clicks + "
            "examination-weighted non-clicks)",
            "slate": "top k by estimate; each position replaced with probability epsilon "
            "by a uniformly random item not in the slate",
        }

    async def slate(self, request: Request) -> list[str]:
        alpha, beta = self.counts.alpha, self.counts.beta
        greedy = top_k(alpha / (alpha + beta), request.count)
        rows = explore_positions(self._rng, greedy, len(alpha), self._epsilon)
        return _ids(self.counts.catalog, rows)

    async def learn(self, request: Request, slate: Sequence[str], outcome: Outcome) -> None:
        self.counts.observe(slate, outcome)

    async def aclose(self) -> None:
        return None


def with_intercept(visible: Matrix) -> Matrix:
    return np.hstack([visible, np.ones((len(visible), 1))])


@dataclass(slots=True)
class Evidence:
    """Sufficient statistics of a linear-Gaussian model: sum of w x x^T and of w y x."""

    gram: Matrix
    moment: Vector

    @classmethod
    def empty(cls, dim: int) -> Evidence:
        return cls(np.zeros((dim, dim)), np.zeros(dim))

    def add(self, features: Matrix, targets: Vector, scale: Vector) -> None:
        """Observations ``y ~ scale * <x, theta>``: the regressor is ``scale * x``."""
        scaled = features * scale[:, np.newaxis]
        self.gram += scaled.T @ scaled
        self.moment += scaled.T @ targets


def posterior(
    evidence: Evidence, prior_mean: Vector, prior_precision: float
) -> tuple[Matrix, Vector]:
    """Precision and mean of theta under the prior N(prior_mean, I / prior_precision) and
    unit observation noise (the sampling scale absorbs the noise's size)."""
    precision = prior_precision * np.eye(len(prior_mean)) + evidence.gram
    mean = np.linalg.solve(precision, prior_precision * prior_mean + evidence.moment)
    return precision, mean.astype(np.float64)


def draw(rng: np.random.Generator, precision: Matrix, mean: Vector, scale: float) -> Vector:
    """One sample of N(mean, scale^2 precision^-1): with precision = L L^T, mean +
    scale L^-T e."""
    lower = np.linalg.cholesky(precision)
    return mean + scale * np.linalg.solve(lower.T, rng.standard_normal(len(mean)))


@dataclass(frozen=True, slots=True)
class LinearThompsonConfig:
    # Prior precision of a user's weights around the population's: how many slates'
    # worth of evidence the population's view is worth.
    prior_precision: float = 1.0
    # Posterior draws are scaled by this: the click noise's standard deviation and the
    # exploration knob of linear TS (Agrawal and Goyal's v).
    exploration: float = 0.1
    # The population model's own prior precision around zero.
    population_precision: float = 1.0


class LinearThompson:
    """Per-user linear Thompson sampling on the visible vectors (plus an intercept)."""

    name = "lin_ts"

    def __init__(
        self,
        catalog: Catalog,
        examine: Vector,
        rng: np.random.Generator,
        config: LinearThompsonConfig,
    ) -> None:
        self._catalog = catalog
        self._examine = examine
        self._rng = rng
        self._config = config
        self._features = with_intercept(catalog.visible)
        self._index_of = {item_id: i for i, item_id in enumerate(catalog.item_ids)}
        dim = self._features.shape[1]
        self._users: dict[str, Evidence] = {}
        self._population = Evidence.empty(dim)
        self._population_mean = np.zeros(dim)

    def configuration(self) -> dict[str, Any]:
        return {
            **asdict(self._config),
            "features": f"visible vector ({self._features.shape[1] - 1}) and an intercept",
            "model": "click ~ examine(position) * <x, theta_user>, theta_user ~ "
            "N(theta_population, I / prior_precision); theta_population: the same "
            "regression on everyone's outcomes (posterior mean, refreshed every slate)",
            "slate": "top k by <x, theta> for one posterior draw",
        }

    async def slate(self, request: Request) -> list[str]:
        evidence = self._users.get(request.user_id)
        if evidence is None:
            evidence = Evidence.empty(len(self._population_mean))
        precision, mean = posterior(evidence, self._population_mean, self._config.prior_precision)
        theta = draw(self._rng, precision, mean, self._config.exploration)
        return _ids(self._catalog, top_k(self._features @ theta, request.count))

    async def learn(self, request: Request, slate: Sequence[str], outcome: Outcome) -> None:
        rows = slate_rows(self._index_of, slate)
        features = self._features[rows]
        clicks = outcome.clicked.astype(np.float64)
        scale = self._examine[: len(rows)]
        evidence = self._users.setdefault(request.user_id, Evidence.empty(features.shape[1]))
        evidence.add(features, clicks, scale)
        self._population.add(features, clicks, scale)
        zero = np.zeros(len(self._population_mean))
        _, self._population_mean = posterior(
            self._population, zero, self._config.population_precision
        )

    async def aclose(self) -> None:
        return None
