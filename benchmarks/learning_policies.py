"""The policies of ``benchmarks.learning`` by name, the baselines' grids and, per world of
the family (``benchmarks.learning_family``), their chosen configurations.

The product is two policies: ``perso``, every slate asked of the edge with the user's
token (the headline), and ``perso_origin``, every slate asked of the origin's own API with
the service token; both run with the same settings (``product_config``: the shipped
defaults and the run's ``--set`` overrides, nothing else).

``CHOSEN`` holds, per world, what ``.venv/bin/python -m benchmarks.learning --tune`` picked
on that world's tuning seeds (100 + the reported seed: another catalog, other users, other
requests, drawn the same way, so that the choice is not fitted to the requests it is judged
on); ``--tune`` prints the lines to paste here. The baselines learn from clicks alone
(a dismiss, a cart or a purchase tells them nothing more), the product from everything
the shop reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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

BaselineConfig = BetaPrior | LinearThompsonConfig | VWConfig | None
Config = BaselineConfig | PersoConfig

RANDOM = "random"
BETA_TS = "beta_ts"
EPSILON_GREEDY = "epsilon_greedy"
LIN_TS = "lin_ts"
VW = "vw_cb_adf"
BASELINES = (RANDOM, BETA_TS, EPSILON_GREEDY, LIN_TS, VW)
PERSO = "perso"
PERSO_ORIGIN = "perso_origin"
PRODUCT = (PERSO, PERSO_ORIGIN)
NAMES = (*BASELINES, *PRODUCT)
DEFAULT_NAMES = NAMES


# Per world: what --tune chose (the lines it prints), at the reported length
# (``--tune-slates 8000``; 4,000-slate runs chose otherwise in some worlds): Beta, epsilon-greedy
# and linear TS on the tuning seeds 101 and 102 (``--seeds 1,2``; large_catalog: 101), VW
# on 101 (about 13 s a configuration). VW's lambda 30 was tried in ``subtle`` only, where
# 100 won among the rest; elsewhere the winners are two steps or more from it. In
# large_catalog VW takes the ``clicks`` shop's choice (the same shop with ten times the
# items: there VW takes about 6 minutes a configuration, scoring 20,000 items a slate).
# Every winner is inside its grid. The baselines learn from clicks alone, so ``clicks`` and
# ``graded`` (the same shop reporting carts and purchases too) are the same world to them:
# same trials, same choices.
CHOSEN: dict[str, dict[str, BaselineConfig]] = {
    "clicks": {
        RANDOM: None,
        BETA_TS: BetaPrior(alpha=1.0, beta=30000.0),
        EPSILON_GREEDY: BetaPrior(alpha=1.0, beta=30.0),
        LIN_TS: LinearThompsonConfig(prior_precision=4.0, exploration=0.001),
        VW: VWConfig(softmax_lambda=300.0, learning_rate=0.03),
    },
    "dismisses": {
        RANDOM: None,
        BETA_TS: BetaPrior(alpha=1.0, beta=300.0),
        EPSILON_GREEDY: BetaPrior(alpha=1.0, beta=10.0),
        LIN_TS: LinearThompsonConfig(prior_precision=4.0, exploration=0.01),
        VW: VWConfig(softmax_lambda=300.0, learning_rate=0.03),
    },
    "graded": {
        RANDOM: None,
        BETA_TS: BetaPrior(alpha=1.0, beta=30000.0),
        EPSILON_GREEDY: BetaPrior(alpha=1.0, beta=30.0),
        LIN_TS: LinearThompsonConfig(prior_precision=4.0, exploration=0.001),
        VW: VWConfig(softmax_lambda=300.0, learning_rate=0.03),
    },
    "large_catalog": {
        RANDOM: None,
        BETA_TS: BetaPrior(alpha=1.0, beta=30000.0),
        EPSILON_GREEDY: BetaPrior(alpha=1.0, beta=30.0),
        LIN_TS: LinearThompsonConfig(prior_precision=1.0, exploration=0.001),
        VW: VWConfig(softmax_lambda=300.0, learning_rate=0.03),
    },
    "many_users": {
        RANDOM: None,
        BETA_TS: BetaPrior(alpha=1.0, beta=300.0),
        EPSILON_GREEDY: BetaPrior(alpha=1.0, beta=30.0),
        LIN_TS: LinearThompsonConfig(prior_precision=4.0, exploration=0.01),
        VW: VWConfig(softmax_lambda=1000.0, learning_rate=0.01),
    },
    "subtle": {
        RANDOM: None,
        BETA_TS: BetaPrior(alpha=1.0, beta=10000.0),
        EPSILON_GREEDY: BetaPrior(alpha=1.0, beta=30.0),
        LIN_TS: LinearThompsonConfig(prior_precision=4.0, exploration=0.002),
        VW: VWConfig(softmax_lambda=100.0, learning_rate=0.1),
    },
}

# The prior for the Beta learners (a prior mean from 1/2 to about 1e-6: how promising an unseen
# item looks, which sets how much they explore); prior strength and exploration scale for
# linear TS; exploration (softmax lambda) and learning rate for VW. A first sweep on the
# tuning seeds put winners at the ends of the former grids (Beta's 1,000, linear TS's
# exploration 0.02 and prior 1, VW's learning rate 0.03): each grid goes past them.
BETA_PRIORS = (1.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, 1e4, 3e4, 1e5, 3e5, 1e6)
GRIDS: dict[str, list[BaselineConfig]] = {
    RANDOM: [None],
    BETA_TS: [BetaPrior(1.0, b) for b in BETA_PRIORS],
    EPSILON_GREEDY: [BetaPrior(1.0, b) for b in BETA_PRIORS],
    LIN_TS: [
        LinearThompsonConfig(prior_precision=p, exploration=e)
        for p in (0.25, 1.0, 4.0, 16.0)
        for e in (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05)
    ],
    # The direct method (plain regression on the shown items) across exploration and
    # learning rates; VW's default cb_type (mtr, importance-weighted by 1 / p) lost to it in
    # every world of the first sweep and is left out.
    VW: [
        VWConfig(softmax_lambda=lam, learning_rate=lr, cb_type="dm")
        for lam in (30.0, 100.0, 300.0, 1000.0, 3000.0)
        for lr in (0.003, 0.01, 0.03, 0.1, 0.3)
    ],
}


def product_config(name: str, overrides: Mapping[str, Any]) -> PersoConfig:
    """The product policy ``name``'s configuration: the same settings on either path."""
    if name not in PRODUCT:
        raise ValueError(f"{name!r} is not one of the product's policies {PRODUCT}")
    return PersoConfig(overrides=overrides, path="edge" if name == PERSO else "origin")


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
