"""Choosing the baselines' configurations per world (``benchmarks.learning --tune``).

Each configuration of a baseline's grid (``benchmarks.learning_policies.GRIDS``) is run on
the world's tuning seeds, 100 + each reported seed (seeds from 100 are never reported: the
choice is not fitted to the requests it is judged on), for ``--tune-slates`` slates; the
winner has the lowest mean cumulative regret over those seeds. A winner at the end of one
of its grid's axes (the lowest or highest value tried of a knob) may be short of the best:
``on_edge`` says so, and the grid should be widened that way. ``chosen_lines`` prints a
world's winners as the lines of ``CHOSEN`` to paste.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.learning_policies import GRIDS, BaselineConfig, build
from benchmarks.learning_run import describe, drive
from benchmarks.regret import regret_pct
from benchmarks.shop_world import WorldConfig, make_world, requests
from perso.console import table

# A tuning world's seed is a reported seed plus this: another catalog, other users, other
# requests, drawn the same way. Reported seeds stay below it.
TUNING_SEED_OFFSET = 100

CONSTANT_NAMES = {
    "random": "RANDOM",
    "beta_ts": "BETA_TS",
    "epsilon_greedy": "EPSILON_GREEDY",
    "lin_ts": "LIN_TS",
    "vw_cb_adf": "VW",
}


@dataclass(frozen=True, slots=True)
class Trial:
    config: BaselineConfig
    cum_regret_pct: float | None  # mean over the tuning seeds
    by_seed: dict[int, float | None]
    seconds: float


def tuning_seeds(seeds: Sequence[int]) -> list[int]:
    return [TUNING_SEED_OFFSET + seed for seed in seeds]


async def tune(name: str, config: WorldConfig, seeds: Sequence[int], slates: int) -> list[Trial]:
    """Each configuration of ``GRIDS[name]`` run for ``slates`` slates on each tuning seed
    (already offset); the best (lowest mean cumulative regret) first. Each trial is
    printed as it ends. Raises ImportError for VW when the bench extra is missing."""
    worlds = {seed: make_world(config, seed) for seed in seeds}
    asked = {seed: requests(world, slates, seed) for seed, world in worlds.items()}
    trials = []
    for candidate in GRIDS[name]:
        by_seed: dict[int, float | None] = {}
        seconds = 0.0
        for seed, world in worlds.items():
            policy = await build(name, world, seed, candidate)
            try:
                trace = await drive(world, policy, asked[seed], seed)
            finally:
                await policy.aclose()
            by_seed[seed] = regret_pct(trace.regret, trace.oracle)
            seconds += trace.seconds
        present = [v for v in by_seed.values() if v is not None]
        mean = round(statistics.fmean(present), 2) if present else None
        trials.append(Trial(candidate, mean, by_seed, round(seconds, 1)))
        shown = literal(candidate, GRIDS[name])
        print(f"  {name} {shown}: {mean}% ({seconds:.0f} s)", flush=True)
    return sorted(
        trials, key=lambda t: float("inf") if t.cum_regret_pct is None else t.cum_regret_pct
    )


def _knobs(config: BaselineConfig) -> dict[str, Any]:
    return {} if config is None else dataclasses.asdict(config)


def _numeric(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def on_edge(winner: BaselineConfig, grid: Sequence[BaselineConfig]) -> list[str]:
    """Where ``winner`` sits at an end of its grid: for each numeric knob that takes several
    values among the grid's configurations of its kind (same type, same non-numeric knobs:
    VW's ``cb_type``), whether it is the lowest or the highest of them."""
    mine = _knobs(winner)
    kin = [
        _knobs(c)
        for c in grid
        if type(c) is type(winner)
        and all(_knobs(c)[k] == v for k, v in mine.items() if not _numeric(v))
    ]
    found = []
    for key, value in mine.items():
        if not _numeric(value):
            continue
        values = sorted({c[key] for c in kin})
        if len(values) < 2:
            continue
        tried = ", ".join(f"{v:g}" for v in values)
        if value == values[0]:
            found.append(f"{key}={value:g} is the lowest tried ({tried})")
        elif value == values[-1]:
            found.append(f"{key}={value:g} is the highest tried ({tried})")
    return found


def _source(value: object) -> str:
    """A knob's value as source, strings in double quotes as the formatter writes them."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def literal(config: BaselineConfig, grid: Sequence[BaselineConfig]) -> str:
    """``config`` as Python source: its knobs up to the last one that the grid varies or that
    differs from its default (``BetaPrior(alpha=1.0, beta=1000.0)``)."""
    if config is None:
        return "None"
    fields = dataclasses.fields(config)
    values = dataclasses.asdict(config)
    varied = {
        f.name
        for f in fields
        if len({repr(_knobs(c).get(f.name)) for c in grid}) > 1 or values[f.name] != f.default
    }
    last = max((n for n, f in enumerate(fields) if f.name in varied), default=-1)
    shown = ", ".join(f"{f.name}={_source(values[f.name])}" for f in fields[: last + 1])
    return f"{type(config).__name__}({shown})"


def chosen_lines(world: str, chosen: dict[str, BaselineConfig]) -> str:
    """A world's entry of ``CHOSEN``, to paste."""
    rows = [
        f"        {CONSTANT_NAMES.get(name, json.dumps(name))}: {literal(config, GRIDS[name])},"
        for name, config in chosen.items()
    ]
    return "\n".join([f'    "{world}": {{', *rows, "    },"])


async def tune_world(
    world: str,
    config: WorldConfig,
    *,
    names: Sequence[str],
    seeds: Sequence[int],
    slates: int,
    current: dict[str, BaselineConfig],
) -> tuple[dict[str, BaselineConfig], dict[str, Any]]:
    """Each baseline's grid on the world's tuning seeds (``seeds`` already offset): the
    winners (the current choice for a baseline that could not run) and every trial."""
    chosen = dict(current)
    report: dict[str, Any] = {}
    for name in names:
        print(f"\ntuning {name} on {world} ({slates:,} slates, seeds {seeds}):", flush=True)
        try:
            trials = await tune(name, config, seeds, slates)
        except ImportError as exc:
            print(f"  {exc.name} is not installed (make bench-deps): {name} kept as chosen")
            continue
        best = trials[0]
        chosen[name] = best.config
        edges = on_edge(best.config, GRIDS[name])
        report[name] = {
            "winner": describe(best.config),
            "on_edge": edges,
            "trials": [
                {"config": describe(t.config), "cum_regret_pct": t.cum_regret_pct,
                 "by_seed": t.by_seed, "seconds": t.seconds}
                for t in trials
            ],
        }  # fmt: skip
        rows = [[literal(t.config, GRIDS[name]), f"{t.cum_regret_pct}%"] for t in trials]
        print(table(["configuration", "cum regret (mean over seeds)"], rows))
        print(
            f"  winner on the edge of its grid: {'; '.join(edges)}"
            if edges
            else "  winner inside its grid"
        )
    return chosen, report
