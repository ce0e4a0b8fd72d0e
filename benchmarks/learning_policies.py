"""The baselines of ``benchmarks.learning`` by name, their grids and chosen configurations.

``CHOSEN`` holds what ``.venv/bin/python -m benchmarks.learning --tune`` picked on the
default world sizes (the tuning world is seeded apart from the measured one, so the
choice is not fitted to the requests it is judged on); the figures of that tuning run
are in the docstring of ``benchmarks.learning``. Change the world and ``--tune`` again.
"""

from __future__ import annotations

from benchmarks.learning_baselines import (
    BetaPrior,
    BetaThompson,
    EpsilonGreedy,
    LinearThompson,
    LinearThompsonConfig,
    RandomSlates,
)
from benchmarks.perso_policy import PersoConfig, started
from benchmarks.shop_world import ShopWorld, stream
from benchmarks.slate_policy import Policy
from benchmarks.vw_policy import VowpalWabbit, VWConfig

Config = BetaPrior | LinearThompsonConfig | VWConfig | PersoConfig | None

RANDOM = "random"
BETA_TS = "beta_ts"
EPSILON_GREEDY = "epsilon_greedy"
LIN_TS = "lin_ts"
VW = "vw_cb_adf"
BASELINES = (RANDOM, BETA_TS, EPSILON_GREEDY, LIN_TS, VW)
# The product through a running stack (``benchmarks.perso_policy``), with the freshness
# tiers off (every user's feedback applied at once); beside it, the same with power and
# active users ranked at the edge from their segment's pool (issue 18: the edge's ranking
# must not learn worse than the origin's), and, to measure what holding costs, with the
# tiers on.
PERSO = "perso"
PERSO_EDGE = "perso_edge"
PERSO_TIERS = "perso_tiers"
PRODUCT = (PERSO, PERSO_EDGE, PERSO_TIERS)
NAMES = (*BASELINES, *PRODUCT)
DEFAULT_NAMES = (*BASELINES, PERSO, PERSO_EDGE)

CHOSEN: dict[str, Config] = {
    RANDOM: None,
    BETA_TS: BetaPrior(alpha=1.0, beta=1000.0),
    EPSILON_GREEDY: BetaPrior(alpha=1.0, beta=100.0),
    LIN_TS: LinearThompsonConfig(prior_precision=4.0, exploration=0.05),
    VW: VWConfig(softmax_lambda=300.0, learning_rate=0.1, cb_type="dm"),
    PERSO: PersoConfig(),
    PERSO_EDGE: PersoConfig(edge_ranking=True),
    PERSO_TIERS: PersoConfig(freshness_tiers=True),
}

# The prior for the Beta learners (a prior mean from 1/2 to 1/1001: how promising an unseen
# item looks, which sets how much they explore); prior strength and exploration scale for linear TS;
# exploration (softmax lambda) and learning rate for VW.
GRIDS: dict[str, list[Config]] = {
    RANDOM: [None],
    BETA_TS: [BetaPrior(1.0, b) for b in (1.0, 10.0, 30.0, 100.0, 300.0, 1000.0)],
    EPSILON_GREEDY: [BetaPrior(1.0, b) for b in (1.0, 10.0, 30.0, 100.0, 300.0, 1000.0)],
    LIN_TS: [
        LinearThompsonConfig(prior_precision=p, exploration=e)
        for p in (1.0, 4.0, 16.0)
        for e in (0.02, 0.05, 0.1)
    ],
    # The direct method (plain regression on the shown items) across exploration and
    # learning rates, and VW's default cb_type (mtr, importance-weighted by 1 / p) beside it.
    VW: [
        *(
            VWConfig(softmax_lambda=lam, learning_rate=lr, cb_type="dm")
            for lam in (30.0, 100.0, 300.0)
            for lr in (0.1, 0.5, 1.0)
        ),
        *(VWConfig(softmax_lambda=lam, learning_rate=0.5, cb_type="mtr") for lam in (30.0, 100.0)),
    ],
}


async def build(name: str, world: ShopWorld, seed: int, config: Config) -> Policy:
    """A fresh policy on the world's catalog with an exploration stream of its own. Raises
    ImportError for VW when the bench extra is missing."""
    catalog, examine, rng = world.catalog, world.examine, stream(seed, "policy", name)
    if name == RANDOM:
        return RandomSlates(catalog, rng)
    if name == BETA_TS and isinstance(config, BetaPrior):
        return BetaThompson(catalog, examine, rng, config)
    if name == EPSILON_GREEDY and isinstance(config, BetaPrior):
        return EpsilonGreedy(catalog, examine, rng, config)
    if name == LIN_TS and isinstance(config, LinearThompsonConfig):
        return LinearThompson(catalog, examine, rng, config)
    if name == VW and isinstance(config, VWConfig):
        return VowpalWabbit(catalog, rng, config)
    if name in PRODUCT and isinstance(config, PersoConfig):
        return await started(world, config, name=name)
    raise ValueError(f"no policy {name!r} with configuration {config!r}")
