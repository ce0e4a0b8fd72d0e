"""Learning quality: regret against an oracle in a simulated shop, for the product (through a
running stack's HTTP API at the edge, ``benchmarks.perso_policy``) and textbook baselines in
the same run and the same world.

The shop (``benchmarks.shop_world``): 2,000 items in 16 categories with hidden tastes and
quality, 300 users whose taste sits in one to three categories, power / active / casual
request rates, position-biased clicks (``benchmarks.click_model``). Every policy serves the
same 20,000 requests (slates of 10) and is told outcomes drawn from a stream of its own;
regret is the oracle's expected clicks minus the slate's, so it carries no click noise.
Figures: regret% (regret / the oracle's expected clicks) per tenth of the run, in the last
tenth and over the whole run, clicks per slate. Two reference lines come from the truth,
not from policies: the best single slate for everyone (the floor of any non-personalised
policy) and each user's best linear ranking of the visible vectors (roughly the floor of a
linear model of them, with unlimited evidence).

The product (``perso``) is a stack started for the run (embedded Redis, origin, a stream
worker, one edge) holding the world's catalog and nothing else; it serves every request
through ``POST /v1/personalize`` at the edge and hears every engagement and dismiss through
``POST /v1/feedback`` with the answer's ``request_id``; what was shown it knows from its
own decision log. It learns asynchronously (streams, workers, reward joins closing after
``PersoConfig.reward_wait_s``, 3 s: the run compresses a shop's day into minutes), with the
freshness tiers off; ``perso_edge`` is the same stack with power and active users ranked at
the edge from their segment's pool (issue 18: it must not learn worse than the origin's
ranking; pools refreshed every 6 s, the product's 60 s compressed as the reward wait is);
``perso_tiers`` (not in the default run: ``--policies perso_tiers``)
is the same with the product's default tiers, which hold active and casual users' feedback
for up to 5 and 60 minutes: longer than the run. The product learns in seconds of lag (the
worker's batches, the reward wait), so a path that answers faster would span more slates
with the same lag and learn less per slate: every product run is paced at
``--slates-per-s`` (default 60, under what the origin's path sustains on 2 cores), so
``perso`` and ``perso_edge`` compare at equal lag. The baselines learn at once and run
unpaced.

The baselines (``benchmarks.learning_baselines``, ``benchmarks.vw_policy``) run with
``benchmarks.learning_policies.CHOSEN``; ``--tune`` first runs their grids for
``--tune-slates`` slates on a world of its own (seed + 1000) and uses the winners. VW
serves ``--vw-slates`` requests (default: all of them; the first ones of the same stream,
reported on the same windows, with everyone's cumulative regret at its end in the JSON).
With its examples parsed once it takes 1.5-3 ms a slate, so the full run is affordable.

Run: ``.venv/bin/python -m benchmarks.learning [--slates 20000] [--users 300] [--items
2000] [--seed 1] [--vw-slates N] [--policies perso,random,lin_ts,...] [--out DIR] [--tune
[--tune-slates 5000]]``. Writes ``learning.json`` and ``learning.png`` to ``--out``
(default ``.perso/bench/learning``). VW comes with ``make bench-deps``; without it VW's
figures are null, and the run says so.

Measured with the defaults (x86_64, 2 shared cores, Python 3.11.7; 70 s in all, VW 34-59 s
of it depending on the machine's load):

    policy          final tenth  cumulative  clicks/slate
    random                88.9%       88.9%         0.163
    beta_ts               82.1%       83.3%         0.244
    epsilon_greedy        82.5%       82.9%         0.246
    lin_ts                48.4%       60.2%         0.578
    vw_cb_adf             42.3%       54.7%         0.658
    (oracle 1.455 expected clicks a slate; best single slate 70.1%, best linear 38.3%)

``--tune`` (5,000 slates on seed 1001) chose: Beta-TS prior Beta(1, 1000) (82.9% against
88.4% for Beta(1, 1)), epsilon-greedy prior Beta(1, 100) (82.8%), linear TS prior
precision 4 and exploration 0.05 (70.0%, 78.6% at 0.1), VW softmax lambda 300, learning
rate 0.1, ``--cb_type dm`` (73.8%; lambda 100 with rate 0.5: 74.0%; the best ``mtr``,
VW's default: 77.8%).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from benchmarks.learning_policies import (
    CHOSEN,
    DEFAULT_NAMES,
    GRIDS,
    NAMES,
    PRODUCT,
    VW,
    Config,
)
from benchmarks.learning_report import figures_json, plot, tables
from benchmarks.learning_run import TUNING_SEED_OFFSET, PolicyRun, describe, run_policy, tune
from benchmarks.regret import WINDOWS
from benchmarks.report import machine, save_and_finish
from benchmarks.shop_world import (
    ShopWorld,
    WorldConfig,
    global_slate_regret_pct,
    linear_slate_regret_pct,
    make_world,
    requests,
    visible_r2,
)
from perso.console import table

# Slates a second the product's runs are paced at: the origin's path sustains about 70 on
# 2 cores, the edge's about 180.
PRODUCT_PACE = 60.0


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


async def tune_all(
    names: Sequence[str], config: WorldConfig, seed: int, slates: int
) -> tuple[dict[str, Config], dict[str, Any]]:
    """Each baseline's grid on the tuning world; the winners and every trial's figure."""
    chosen: dict[str, Config] = {name: CHOSEN[name] for name in names}
    report: dict[str, Any] = {}
    for name in names:
        try:
            trials = await tune(name, config, seed, slates)
        except ImportError as exc:
            print(f"\ntuning {name}: {exc.name} is not installed (make bench-deps)")
            continue
        chosen[name] = trials[0].config
        report[name] = [
            {"config": describe(t.config), "cum_regret_pct": t.cum_regret_pct} for t in trials
        ]
        rows = [[json.dumps(describe(t.config)), _pct(t.cum_regret_pct)] for t in trials]
        print(f"\ntuning {name} ({slates:,} slates, seed {seed + TUNING_SEED_OFFSET}):")
        print(table(["configuration", "cum regret"], rows))
    return chosen, report


def describe_world(world: ShopWorld, users: np.ndarray[Any, np.dtype[np.intp]]) -> dict[str, Any]:
    """The world's settings and what the truth says about it (not policies)."""
    config = world.config
    references = {
        "best single slate for everyone": global_slate_regret_pct(world, users),
        "best linear ranking of the visible vectors": linear_slate_regret_pct(world, users),
    }
    return {
        **{k: v for k, v in dataclasses.asdict(config).items() if k != "click"},
        "click": dataclasses.asdict(config.click),
        "activity": {a: world.activity.count(a) for a in sorted(set(world.activity))},
        "visible_r2": round(visible_r2(world), 3),
        "oracle_clicks_per_slate": round(float(world.oracle_clicks[users].mean()), 4),
        "references_regret_pct": {k: round(v, 2) for k, v in references.items()},
    }


def print_world(about: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    activity = ", ".join(f"{n} {a}" for a, n in about["activity"].items())
    print(
        f"shop: {about['items']:,} items in {about['categories']} categories, "
        f"{about['users']} users ({activity}), slates of {about['slate_size']}, "
        f"{args.slates:,} requests, seed {args.seed}; the visible vectors explain "
        f"{100 * about['visible_r2']:.0f}% of the hidden tastes' variance"
    )
    print(f"oracle: {about['oracle_clicks_per_slate']:.3f} expected clicks per slate")
    if args.slates_per_s > 0:
        print(f"the product's runs are paced at {args.slates_per_s:g} slates a second")
    for label, value in about["references_regret_pct"].items():
        print(f"reference (from the truth, not a policy): {label}: {value:.1f}% regret")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--slates", type=int, default=20_000)
    parser.add_argument("--users", type=int, default=300)
    parser.add_argument("--items", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--vw-slates", type=int, help="VW serves the first N (default: all)")
    parser.add_argument(
        "--policies",
        default=",".join(DEFAULT_NAMES),
        help=f"a comma-separated subset of {','.join(NAMES)}",
    )
    parser.add_argument("--out", type=Path, default=Path(".perso/bench/learning"))
    parser.add_argument("--tune", action="store_true", help="run the grids first, use winners")
    parser.add_argument("--tune-slates", type=int, default=5_000)
    parser.add_argument(
        "--slates-per-s",
        type=float,
        default=PRODUCT_PACE,
        help="the product's runs are paced at this many slates a second (0: unpaced)",
    )
    args = parser.parse_args(argv)
    args.policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = sorted(set(args.policies) - set(NAMES))
    if unknown:
        parser.error(f"unknown policies {unknown}; known: {', '.join(NAMES)}")
    if args.slates_per_s < 0:
        parser.error("--slates-per-s must be >= 0")
    if args.slates < WINDOWS:
        parser.error(f"--slates must be at least {WINDOWS}")
    if args.vw_slates is not None and not 0 < args.vw_slates <= args.slates:
        parser.error("--vw-slates must be in 1..--slates")
    return args


async def measure(args: argparse.Namespace) -> tuple[dict[str, Any], list[PolicyRun]]:
    """Tune if asked, then run every policy through the same world and requests."""
    config = WorldConfig(items=args.items, users=args.users)
    world = make_world(config, args.seed)
    stream = requests(world, args.slates, args.seed)
    about = describe_world(world, np.fromiter((r.user for r in stream), np.intp, len(stream)))
    print_world(about, args)
    configs = {name: CHOSEN[name] for name in args.policies}
    tuning = None
    if args.tune:
        tunable = [name for name in args.policies if name in GRIDS]
        tuned, tuning = await tune_all(tunable, config, args.seed, args.tune_slates)
        configs |= tuned
    print()
    runs = []
    for name in args.policies:
        served = stream[: args.vw_slates] if name == VW and args.vw_slates else stream
        pace = args.slates_per_s if name in PRODUCT and args.slates_per_s > 0 else None
        run = await run_policy(
            name,
            configs[name],
            world,
            served,
            seed=args.seed,
            total=args.slates,
            slates_per_s=pace,
        )
        done = run.figures
        print(
            f"{name}: {run.missing}"
            if done is None
            else f"{name}: {done.slates:,} slates in {done.seconds:.1f} s, cumulative regret "
            f"{_pct(done.cum_regret_pct)}",
            flush=True,
        )
        runs.append(run)
    result = {
        **figures_json(runs, args.slates),
        "world": {**about, "seed": args.seed},
        "slates": args.slates,
        "windows": WINDOWS,
        "vw_slates": args.vw_slates or args.slates,
        "product_slates_per_s": args.slates_per_s or None,
        "tuning": tuning,
    }
    return result, runs


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.perf_counter()
    # Small matrices, one request at a time: BLAS threads would only add overhead.
    threadpool_limits(limits=1, user_api="blas")
    result, runs = asyncio.run(measure(args))
    print()
    print(tables(runs, args.slates))
    args.out.mkdir(parents=True, exist_ok=True)
    json_path, png_path = args.out / "learning.json", args.out / "learning.png"
    plot(png_path, runs, args.slates, result["world"]["references_regret_pct"])
    save_and_finish(result, json_path, png_path, started)


if __name__ == "__main__":
    main()
