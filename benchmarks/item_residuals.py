"""Do items learning from co-engagement pay? Measured before building it into the product.

Issue 28 allows a residual vector per item, learned from joined rewards with the catalog
vector as its prior, "if the family shows it helps; measure before keeping". Building it
into the product means a per-item vector written by every worker, read with every
candidate at the origin and carried with every pool to the edges. This benchmark asks
first whether the idea pays at its best, on the family's shops (``benchmarks.
learning_family``), with the family's strongest linear learner:

- the baseline: per-user linear Thompson sampling on the visible vectors
  (``benchmarks.learning_baselines.LinearThompson``, the configuration chosen per shop in
  ``benchmarks.learning_policies.CHOSEN``);
- the same learner whose items each learn a residual vector r_i: the item's features are
  x_i + r_i, with r_i ~ N(0, I / residual_precision), updated exactly (a full Gaussian
  posterior per item, an upper bound on what a diagonal one in a product would learn)
  from every shown item's outcome, with the user's posterior mean as the regressor:
  ``click - e_p <x_i, theta_u> ~ e_p <r_i, theta_u>``. The user's evidence is then taken
  on the corrected vectors.

Both run in-process, unpaced, on the same requests and from the same random streams (the
outcome stream diverges only where their slates do). ``--tune`` tries the residual
precisions on the tuning seeds (100 + seed); the report runs the chosen one on seeds 1-3.
The last line is one JSON object: per shop, both learners' final-tenth and cumulative
regret (medians over the seeds) and their ratio.

    .venv/bin/python -m benchmarks.item_residuals [--tune] [--seeds 1,2,3] [--shops ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from benchmarks.click_model import Outcome
from benchmarks.learning_baselines import (
    Evidence,
    LinearThompson,
    LinearThompsonConfig,
    posterior,
    slate_rows,
)
from benchmarks.learning_family import NAMES, Shop, shop
from benchmarks.learning_policies import CHOSEN, LIN_TS
from benchmarks.learning_run import drive
from benchmarks.regret import WINDOWS, figures
from benchmarks.shop_world import Catalog, Request, make_world, requests, stream

PRECISIONS = (10.0, 30.0, 100.0, 300.0, 1000.0)
CHOSEN_PRECISION = 1000.0  # the least harmful on the tuning seeds (see the module doc)


class ResidualLinearThompson(LinearThompson):
    """Per-user linear TS whose items learn residual vectors from the outcomes."""

    def __init__(
        self,
        catalog: Catalog,
        examine: np.ndarray[Any, np.dtype[np.float64]],
        rng: np.random.Generator,
        config: LinearThompsonConfig,
        residual_precision: float,
    ) -> None:
        super().__init__(catalog, examine, rng, config)
        self._base = self._features.copy()
        self._visible = catalog.visible.shape[1]  # the intercept learns no residual
        items, v = len(catalog.item_ids), self._visible
        self._residual_precision = residual_precision
        self._gram = np.zeros((items, v, v))
        self._moment = np.zeros((items, v))

    def configuration(self) -> dict[str, Any]:
        return {
            **super().configuration(),
            "residual_precision": self._residual_precision,
            "items": "x_i + r_i, r_i ~ N(0, I / residual_precision), exact posterior per item",
        }

    async def learn(self, request: Request, slate: Sequence[str], outcome: Outcome) -> None:
        rows = slate_rows(self._index_of, slate)
        evidence = self._users.get(request.user_id) or Evidence.empty(self._base.shape[1])
        _, theta = posterior(evidence, self._population_mean, self._config.prior_precision)
        v = self._visible
        scale = self._examine[: len(rows)]
        clicks = outcome.clicked.astype(np.float64)
        regressor = scale[:, np.newaxis] * theta[np.newaxis, :v]
        target = clicks - scale * (self._base[rows] @ theta)
        self._gram[rows] += regressor[:, :, np.newaxis] * regressor[:, np.newaxis, :]
        self._moment[rows] += regressor * target[:, np.newaxis]
        precision = self._residual_precision * np.eye(v) + self._gram[rows]
        residual = np.linalg.solve(precision, self._moment[rows][:, :, np.newaxis])[:, :, 0]
        self._features[rows, :v] = self._base[rows, :v] + residual
        await super().learn(request, slate, outcome)


async def run(chosen: Shop, seed: int, residual_precision: float | None) -> dict[str, float | None]:
    """One learner through one shop and seed: None, the baseline; else with residuals."""
    world = make_world(chosen.config, seed)
    config = CHOSEN[chosen.name][LIN_TS]
    assert isinstance(config, LinearThompsonConfig)
    rng = stream(seed, "policy", LIN_TS)
    policy: LinearThompson = (
        LinearThompson(world.catalog, world.examine, rng, config)
        if residual_precision is None
        else ResidualLinearThompson(world.catalog, world.examine, rng, config, residual_precision)
    )
    trace = await drive(world, policy, requests(world, chosen.slates, seed), seed)
    result = figures(trace, chosen.slates, WINDOWS)
    return {"final": result.final_regret_pct, "cum": result.cum_regret_pct}


def median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 1) if known else None


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2,3", help="reported seeds (tuning: 100 + each)")
    parser.add_argument("--shops", default=",".join(NAMES))
    parser.add_argument("--tune", action="store_true", help="try PRECISIONS on tuning seeds")
    args = parser.parse_args(argv)
    threadpool_limits(limits=1, user_api="blas")
    seeds = [int(s) for s in args.seeds.split(",")]
    shops = [shop(name) for name in args.shops.split(",")]
    if args.tune:
        seeds = [100 + s for s in seeds]
    precisions: tuple[float | None, ...] = (
        (None, *PRECISIONS) if args.tune else (None, CHOSEN_PRECISION)
    )
    started = time.perf_counter()
    summary: dict[str, Any] = {}
    for chosen in shops:
        rows: dict[str, dict[str, float | None]] = {}
        for precision in precisions:
            label = "lin_ts" if precision is None else f"residual_{precision:g}"
            runs = [await run(chosen, seed, precision) for seed in seeds]
            rows[label] = {
                "final_regret_pct": median([r["final"] for r in runs]),
                "cum_regret_pct": median([r["cum"] for r in runs]),
            }
            print(
                f"{chosen.name:14s} {label:16s} final {rows[label]['final_regret_pct']}"
                f"  cum {rows[label]['cum_regret_pct']}  seeds {seeds}",
                flush=True,
            )
        base = rows["lin_ts"]
        for label, row in rows.items():
            if label != "lin_ts" and base["final_regret_pct"] and row["final_regret_pct"]:
                row["final_ratio"] = round(row["final_regret_pct"] / base["final_regret_pct"], 3)
        summary[chosen.name] = rows
    print(
        json.dumps(
            {
                "benchmark": "item_residuals",
                "seeds": seeds,
                "tuning": args.tune,
                "shops": summary,
                "seconds": round(time.perf_counter() - started, 1),
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
