"""What a run of ``benchmarks.learning`` reports over the family of shops: per world, each
policy's figures as medians over the seeds (with their range), whether the product won,
and over the family, the product's median and worst world. The printed tables and the PNG
are ``benchmarks.learning_tables``'.

Per world and policy: the final tenth's regret%, the cumulative regret%, the regret% of
every tenth and the clicks per slate, each the median over the seeds (``by_seed`` keeps
every seed's). The product (``perso``, asked at the edge) **won** a world when its median
final-tenth AND cumulative regret are both below those of linear Thompson sampling and of
Vowpal Wabbit (a world where either did not run is not won). Beside it: the gap between
the product's two paths (|perso - perso_origin|, final tenth, in points) and the product's
first tenth against the best baseline's first tenth (in points: its cold start).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic_core import to_jsonable_python

from benchmarks.learning_family import Shop
from benchmarks.learning_policies import BASELINES, LIN_TS, PERSO, PERSO_ORIGIN, VW
from benchmarks.learning_run import PolicyRun
from benchmarks.regret import Figures
from benchmarks.shop_world import (
    ShopWorld,
    global_slate_regret_pct,
    linear_slate_regret_pct,
    visible_r2,
)

# What the product must beat, in a world, to win it.
RIVALS = (LIN_TS, VW)
REFERENCES = (
    "best single slate for everyone",
    "best linear ranking of the visible vectors",
)


@dataclass(frozen=True, slots=True)
class WorldRuns:
    """A world's runs: every seed's run of every policy, and what the world is."""

    shop: Shop
    about: dict[str, Any]
    runs: dict[int, list[PolicyRun]]  # seed -> its runs


@dataclass(frozen=True, slots=True)
class Spread:
    """A figure over the seeds: its median and range (None: no seed has it)."""

    median: float | None
    low: float | None
    high: float | None

    @classmethod
    def of(cls, values: Sequence[float | None]) -> Spread:
        present = [v for v in values if v is not None]
        if not present:
            return cls(None, None, None)
        return cls(round(statistics.median(present), 2), min(present), max(present))


def truth(world: ShopWorld, users: Sequence[int]) -> dict[str, float]:
    """What the truth says about one seed's world and requests (no policy): its visible_r2,
    the oracle's clicks per slate, the reference lines' regret%."""
    asked = np.asarray(users, np.intp)
    return {
        "visible_r2": round(visible_r2(world), 3),
        "oracle_clicks_per_slate": round(float(world.oracle_clicks[asked].mean()), 4),
        REFERENCES[0]: round(global_slate_regret_pct(world, asked), 2),
        REFERENCES[1]: round(linear_slate_regret_pct(world, asked), 2),
    }


def describe_world(
    shop: Shop, truths: Mapping[int, Mapping[str, float]], slates: int
) -> dict[str, Any]:
    """A world's ``about``: what it is, how it was run, and its truths (medians over the
    seeds, and every seed's)."""

    def median(key: str) -> float:
        return round(statistics.median(t[key] for t in truths.values()), 4)

    return {
        "summary": shop.summary,
        "config": dataclasses.asdict(shop.config),
        "slates": slates,
        "pace": shop.pace,
        "visible_r2": median("visible_r2"),
        "oracle_clicks_per_slate": median("oracle_clicks_per_slate"),
        "references_regret_pct": {label: median(label) for label in REFERENCES},
        "by_seed": {seed: dict(t) for seed, t in truths.items()},
    }


def _by_name(world: WorldRuns) -> dict[str, dict[int, PolicyRun]]:
    """Policy name -> seed -> its run, in the order policies ran."""
    out: dict[str, dict[int, PolicyRun]] = {}
    for seed, runs in world.runs.items():
        for run in runs:
            out.setdefault(run.name, {})[seed] = run
    return out


def _seed(figures: Figures | None) -> dict[str, Any] | None:
    if figures is None:
        return None
    return {
        "final": figures.final_regret_pct,
        "cum": figures.cum_regret_pct,
        "windows": figures.regret_pct_by_window,
        "seconds": figures.seconds,
    }


def policy_figures(by_seed: Mapping[int, PolicyRun]) -> dict[str, Any]:
    """One policy's figures in one world: medians over the seeds, ranges, every seed's."""
    figures = {seed: run.figures for seed, run in by_seed.items()}
    present = [f for f in figures.values() if f is not None]
    final = Spread.of([f.final_regret_pct for f in present])
    cum = Spread.of([f.cum_regret_pct for f in present])
    windows = len(present[0].regret_pct_by_window) if present else 0
    missing = sorted({r.missing for r in by_seed.values() if r.missing})
    return {
        "final_regret_pct": final.median,
        "final_regret_pct_range": [final.low, final.high],
        "cum_regret_pct": cum.median,
        "cum_regret_pct_range": [cum.low, cum.high],
        "regret_pct_by_window": [
            Spread.of([f.regret_pct_by_window[w] for f in present]).median for w in range(windows)
        ]
        or None,
        "clicks_per_slate": Spread.of([f.clicks_per_slate for f in present]).median,
        "by_seed": {seed: _seed(f) for seed, f in figures.items()},
        "configuration": next(iter(by_seed.values())).configuration,
        **({"missing": "; ".join(missing)} if missing else {}),
    }


def _gap(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a - b, 2)


def won(policies: Mapping[str, Mapping[str, Any]]) -> bool:
    """The product's median final AND cumulative regret below both rivals' (all measured)."""
    mine = policies.get(PERSO)
    if mine is None or mine["final_regret_pct"] is None or mine["cum_regret_pct"] is None:
        return False
    for rival in RIVALS:
        theirs = policies.get(rival)
        if theirs is None or theirs["final_regret_pct"] is None or theirs["cum_regret_pct"] is None:
            return False
        if not (
            mine["final_regret_pct"] < theirs["final_regret_pct"]
            and mine["cum_regret_pct"] < theirs["cum_regret_pct"]
        ):
            return False
    return True


def _best(policies: Mapping[str, Mapping[str, Any]], names: Sequence[str], key: str) -> Any:
    """The lowest ``key`` among ``names`` and whose it is: [name, value], or None."""
    present = {n: policies[n][key] for n in names if n in policies and policies[n][key] is not None}
    if not present:
        return None
    name = min(present, key=lambda n: present[n])
    return [name, present[name]]


def _first(figures: Mapping[str, Any]) -> float | None:
    windows = figures["regret_pct_by_window"]
    return windows[0] if windows else None


def world_figures(world: WorldRuns) -> dict[str, Any]:
    """A world's entry of ``by_world``."""
    policies = {name: policy_figures(runs) for name, runs in _by_name(world).items()}
    perso, origin = policies.get(PERSO), policies.get(PERSO_ORIGIN)
    firsts = {
        n: first for n in BASELINES if n in policies and (first := _first(policies[n])) is not None
    }
    best_first = min(firsts, key=lambda n: firsts[n]) if firsts else None
    path_gap = _gap(
        perso["final_regret_pct"] if perso else None,
        origin["final_regret_pct"] if origin else None,
    )
    return {
        "about": world.about,
        "won": won(policies),
        "best_rival_final": _best(policies, RIVALS, "final_regret_pct"),
        "best_rival_cum": _best(policies, RIVALS, "cum_regret_pct"),
        "edge_origin_gap_final_pts": None if path_gap is None else abs(path_gap),
        "first_tenth_gap_pts": _gap(
            _first(perso) if perso else None, firsts[best_first] if best_first else None
        ),
        "first_tenth_best_baseline": best_first,
        "policies": policies,
    }


def family_figures(
    worlds: Sequence[WorldRuns], *, mode: str, overrides: Mapping[str, Any], seeds: Sequence[int]
) -> dict[str, Any]:
    """The run's JSON object (its last line): the family's summary first, then per world."""
    by_world = {w.shop.name: world_figures(w) for w in worlds}
    mine = [f["policies"].get(PERSO) for f in by_world.values()]
    finals = [m["final_regret_pct"] for m in mine if m and m["final_regret_pct"] is not None]
    cums = [m["cum_regret_pct"] for m in mine if m and m["cum_regret_pct"] is not None]
    return {
        "mode": mode,
        "overrides": to_jsonable_python(dict(overrides)),
        "seeds": list(seeds),
        "worlds": len(by_world),
        "worlds_won": sum(1 for f in by_world.values() if f["won"]),
        "median_final_regret_pct": Spread.of(finals).median,
        "worst_final_regret_pct": max(finals, default=None),
        "median_cum_regret_pct": Spread.of(cums).median,
        "worst_cum_regret_pct": max(cums, default=None),
        "by_world": by_world,
    }
