"""Learning quality over a family of simulated shops: regret against an oracle, for the
product (through a running stack's HTTP API, ``benchmarks.perso_policy``) and textbook
baselines, in the same worlds and on the same requests.

The family (``benchmarks.learning_family``): six shops that differ in what feedback they
report (clicks only; clicks and dismisses; clicks, carts and purchases), in their catalog's
popularity attribute (none, noisy, very noisy), in size (2,000 or 20,000 items; 300 to
3,000 users, one shop 70% casual) and in how much of the hidden tastes the visible vectors
show. Each shop (``benchmarks.shop_world``: hidden tastes and quality, power / active /
casual request rates, position-biased clicks) is run on every seed (``--seeds``, default
1, 2, 3): the same world and the same requests for every policy; each policy is told
outcomes from a stream of its own, as the shop reports them. Regret is the oracle's
expected clicks minus the slate's, so it carries no click noise. Figures per world:
regret% (regret / the oracle's expected clicks) per tenth of the run, in the last tenth and
over the whole run, clicks per slate, each the median over the seeds with its range
(``benchmarks.learning_report``). Two reference lines come from the truth, not from
policies: the best single slate for everyone and each user's best linear ranking of the
visible vectors.

The product is a stack started for each run (embedded Redis, origin, a stream worker, one
edge) holding the world's catalog and nothing else: ``perso`` asks every slate of the
edge with the user's token and tells it every outcome (the headline), ``perso_origin``
asks the origin's own API with the service token, with the same settings. They run one
after the other, paced at the shop's ``pace`` slates a second (the product learns with a
lag in seconds, so the pace sets how many slates the lag spans). The baselines of the same
(world, seed) run meanwhile in one separate process, unpaced (``benchmarks.learning_run``),
with the configurations chosen for that world (``benchmarks.learning_policies.CHOSEN``).

Modes:

- **headline** (no ``--set``, no ``--slates``): the product at its shipped defaults,
  nothing changed but the plumbing of a stack of its own;
- **overrides** (``--set NAME=VALUE``, repeatable: a ``Settings`` field and its value):
  the product with those settings changed, each printed and listed in the JSON;
- **shortened** (``--slates N`` alone): the shipped defaults on N slates a world;
- ``--tune``: no measurement; each baseline's grid run on each world's tuning seeds (100 +
  each reported seed, ``--tune-slates``), its trials and winner printed, with the lines
  of ``CHOSEN`` to paste (``benchmarks.learning_tuning``).

Reported seeds are below 100 in every mode: seeds from 100 are the tuning worlds'.

Run: ``make bench-deps && .venv/bin/python -m benchmarks.learning [--worlds all|a,b]
[--seeds 1,2,3] [--policies random,...,perso,perso_origin] [--slates N] [--set NAME=VALUE]
[--out DIR] [--tune [--tune-slates 4000]]``. Writes a ``learning-<world>.png`` per world
and ``learning.json`` to ``--out`` (default ``.perso/bench/learning``); the last line
printed is the JSON summary. VW comes with ``make bench-deps``; without it VW's figures are
null, and the run says so. The run prints its expected duration first (the product's paced
runs and stack starts: the whole family on three seeds, about 100 minutes).

Measured figures: docs/measured.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from benchmarks.learning_family import NAMES as WORLDS
from benchmarks.learning_family import Shop, shop
from benchmarks.learning_measure import measure
from benchmarks.learning_policies import CHOSEN, DEFAULT_NAMES, GRIDS, NAMES, PRODUCT
from benchmarks.learning_report import family_figures
from benchmarks.learning_tables import plot, summary_table, world_table
from benchmarks.learning_tuning import TUNING_SEED_OFFSET, chosen_lines, tune_world, tuning_seeds
from benchmarks.perso_policy import parse_setting, problems
from benchmarks.regret import WINDOWS
from benchmarks.report import finish, machine, save_and_finish
from config.settings import Settings

# What starting a stack takes, roughly (Redis, the catalog's ingest, the processes).
STACK_START_S = 25.0


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--worlds", default="all", help=f"all, or some of {','.join(WORLDS)}")
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated, each below 100")
    parser.add_argument(
        "--policies",
        default=",".join(DEFAULT_NAMES),
        help=f"a comma-separated subset of {','.join(NAMES)}",
    )
    parser.add_argument("--slates", type=int, help="every world runs this many (not headline)")
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a product setting changed from its shipped default (repeatable)",
    )
    parser.add_argument("--out", type=Path, default=Path(".perso/bench/learning"))
    parser.add_argument(
        "--tuning-worlds",
        action="store_true",
        help=f"measure on tuning worlds (seeds from {TUNING_SEED_OFFSET}): to choose the "
        "product's defaults, never reported",
    )
    parser.add_argument("--tune", action="store_true", help="tune the baselines, measure nothing")
    parser.add_argument("--tune-slates", type=int, default=4_000)
    args = parser.parse_args(argv)
    names = WORLDS if args.worlds.strip() == "all" else args.worlds.split(",")
    unknown = sorted({n.strip() for n in names} - set(WORLDS))
    if unknown:
        parser.error(f"unknown worlds {unknown}; the family: {', '.join(WORLDS)}")
    args.worlds = [shop(n.strip()) for n in names if n.strip()]
    try:
        args.seeds = _ints(args.seeds)
    except ValueError:
        parser.error(f"--seeds: comma-separated integers, not {args.seeds!r}")
    if not args.seeds or len(set(args.seeds)) != len(args.seeds):
        parser.error("--seeds: at least one, none twice")
    if args.tuning_worlds:
        if min(args.seeds) < TUNING_SEED_OFFSET:
            parser.error(f"--tuning-worlds: tuning seeds are {TUNING_SEED_OFFSET} and up")
    elif max(args.seeds) >= TUNING_SEED_OFFSET or min(args.seeds) < 0:
        parser.error(
            f"--seeds: reported seeds are 0-{TUNING_SEED_OFFSET - 1}; seeds from "
            f"{TUNING_SEED_OFFSET} are the tuning worlds' (--tuning-worlds)"
        )
    args.policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = sorted(set(args.policies) - set(NAMES))
    if unknown or not args.policies:
        parser.error(f"unknown policies {unknown}; known: {', '.join(NAMES)}")
    if args.slates is not None and args.slates < WINDOWS:
        parser.error(f"--slates must be at least {WINDOWS}")
    if args.tune_slates < WINDOWS:
        parser.error(f"--tune-slates must be at least {WINDOWS}")
    try:
        args.overrides = dict(parse_setting(text) for text in args.settings)
        Settings(**args.overrides)  # the settings together (a model validator may object)
    except ValidationError as exc:
        parser.error(f"--set: {problems(exc)}")
    except ValueError as exc:
        parser.error(str(exc))
    args.mode = mode_of(args)
    return args


def mode_of(args: argparse.Namespace) -> str:
    """``headline`` (the shipped defaults, every world's own slates), ``overrides`` (some
    settings changed), ``shortened`` (the shipped defaults on fewer slates), ``tuning``
    (on tuning worlds) or ``tune``."""
    if args.tune:
        return "tune"
    if args.tuning_worlds:
        return "tuning"
    if args.overrides:
        return "overrides"
    return "headline" if args.slates is None else "shortened"


def slates_of(world: Shop, args: argparse.Namespace) -> int:
    return world.slates if args.slates is None else int(args.slates)


def estimate_s(args: argparse.Namespace) -> float:
    """The product's paced runs and stack starts: the baselines run beside them."""
    runs = sum(1 for p in args.policies if p in PRODUCT)
    worlds: list[Shop] = args.worlds
    per_seed = sum(runs * (slates_of(w, args) / w.pace + STACK_START_S) for w in worlds)
    return per_seed * len(args.seeds)


def print_start(args: argparse.Namespace) -> None:
    print(f"machine: {machine()}")
    if args.mode == "headline":
        print("headline: the product at its shipped defaults")
    if args.mode == "tuning":
        print("tuning worlds (seeds from 100): for choosing defaults, not for reporting")
    if args.overrides:
        print("overrides: the product's settings changed from the shipped defaults:")
        for name, value in args.overrides.items():
            shipped = Settings.model_fields[name].get_default(call_default_factory=True)
            print(f"  {name} = {value!r} (shipped: {shipped!r})")
    if args.slates is not None:
        print(f"--slates {args.slates:,}: every world runs {args.slates:,} slates, not its own")
    for world in args.worlds:
        print(f"  {world.name}: {world.summary}; {slates_of(world, args):,} slates, "
              f"the product paced at {world.pace:g}/s")  # fmt: skip
    print(f"seeds {', '.join(map(str, args.seeds))}; policies {', '.join(args.policies)}")
    if any(p in PRODUCT for p in args.policies):
        print(
            f"expected duration: about {estimate_s(args) / 60:.0f} min (the product's paced "
            f"runs and {STACK_START_S:.0f} s a stack start; the baselines run beside them)",
            flush=True,
        )


async def tune_worlds(args: argparse.Namespace) -> dict[str, Any]:
    tunable = [p for p in args.policies if len(GRIDS.get(p, [])) > 1]
    seeds = tuning_seeds(args.seeds)
    tuning: dict[str, Any] = {}
    lines = []
    for world in args.worlds:
        chosen, report = await tune_world(
            world.name,
            world.config,
            names=tunable,
            seeds=seeds,
            slates=args.tune_slates,
            current=CHOSEN[world.name],
        )
        tuning[world.name] = report
        lines.append(chosen_lines(world.name, chosen))
    print("\nCHOSEN entries to paste into benchmarks/learning_policies.py:")
    print("\n".join(lines))
    return {"mode": "tune", "seeds": seeds, "worlds": len(args.worlds), "tuning": tuning}


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.perf_counter()
    # Small matrices, one request at a time: BLAS threads would only add overhead.
    threadpool_limits(limits=1, user_api="blas")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.tune:
        print(f"machine: {machine()}")
        result = asyncio.run(tune_worlds(args))
        path = args.out / "learning-tuning.json"
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"\ntrials: {path}")
        finish({**result, "json": str(path), "seconds": round(time.perf_counter() - started)})
        return
    print_start(args)
    worlds = asyncio.run(
        measure(args.worlds, args.seeds, args.policies, args.overrides, args.slates)
    )
    result = family_figures(worlds, mode=args.mode, overrides=args.overrides, seeds=args.seeds)
    result["slates_override"] = args.slates
    pngs = []
    for name, figures in result["by_world"].items():
        print()
        print(world_table(name, figures))
        png = args.out / f"learning-{name}.png"
        plot(png, name, figures)
        pngs.append(str(png))
    print("\nthe family:")
    print(summary_table(result))
    result["pngs"] = pngs
    save_and_finish(result, args.out / "learning.json", args.out / "learning-*.png", started)


if __name__ == "__main__":
    main()
