"""What ``benchmarks.edge_ranking_quality`` reports: its figures from the measured pairs and
pools (``summary``, the JSON), the tables it prints and its PNG.

The headline is the edge's expected clicks over the origin's, summed over the requests the
edge ranked itself, each also asked of the origin: the baseline is the origin's ranking of
the same requests in the same run. Pool figures are means over users (each user once).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.paired_ratio import PairedRatio, paired_ratio
from benchmarks.pool_sizing import recommended_size
from benchmarks.shop_world import ShopWorld, stream
from perso import plots
from perso.console import table

GOAL = 0.97
# The origin's personal top items the pools are asked to hold.
TOP = 20
CLASSES = ("power", "active", "casual")
# A pool size is recommended when within this of the largest on recall and on clicks.
TOLERANCE = 0.01


@dataclass(frozen=True, slots=True)
class Pair:
    """One request asked of both paths: what each slate earns (None: no answer)."""

    user: int
    activity: str
    edge: float | None
    origin: float | None
    tier: str
    ranked_here: bool


@dataclass(frozen=True, slots=True)
class Sizing:
    """One user's pools at each size against the origin's ranking at exploration 0."""

    user: int
    activity: str
    recall: dict[int, float]  # size -> share of the origin's top ``TOP`` in the pool
    pool_clicks: dict[int, float]  # size -> the edge code's slate from that pool
    origin_clicks: float  # the origin's first 10 at exploration 0
    edge_clicks: float | None  # the edge's own answer at exploration 0, if it ranked it
    # share of the top ``TOP`` in the pool as filled joined with the user's own candidates
    # (``edge.ranking.own_candidates``; None: not measured, none configured)
    own_recall: float | None = None


def _rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def ratio_block(
    edge: Sequence[float], origin: Sequence[float], rng: np.random.Generator
) -> dict[str, Any]:
    """Both paths' expected clicks per slate and their paired ratio with its interval."""
    found: PairedRatio | None = paired_ratio(np.array(edge), np.array(origin), rng)
    return {
        "n": len(edge),
        "edge_clicks_per_slate": _rounded(float(np.mean(edge))) if edge else None,
        "origin_clicks_per_slate": _rounded(float(np.mean(origin))) if origin else None,
        "ratio": None if found is None else round(found.ratio, 4),
        "ci95": None if found is None else [round(found.low, 4), round(found.high, 4)],
    }


def compared(pairs: Sequence[Pair]) -> list[Pair]:
    """The pairs the edge ranked itself and both paths answered."""
    return [p for p in pairs if p.ranked_here and p.edge is not None and p.origin is not None]


def slate_figures(
    pairs: Sequence[Pair], world: ShopWorld, rng: np.random.Generator
) -> dict[str, Any]:
    both = compared(pairs)
    overall = ratio_block([p.edge or 0.0 for p in both], [p.origin or 0.0 for p in both], rng)
    by_class = {}
    for activity in CLASSES:
        of_class = [p for p in both if p.activity == activity]
        block = ratio_block(
            [p.edge or 0.0 for p in of_class], [p.origin or 0.0 for p in of_class], rng
        )
        by_class[activity] = {
            "requests": sum(1 for p in pairs if p.activity == activity),
            "ranked_at_edge": sum(1 for p in pairs if p.activity == activity and p.ranked_here),
            **block,
        }
    oracle = [float(world.oracle_clicks[p.user]) for p in both]
    return {
        **overall,
        "oracle_clicks_per_slate": _rounded(float(np.mean(oracle))) if oracle else None,
        "by_class": by_class,
    }


def counts(pairs: Sequence[Pair]) -> dict[str, int]:
    """How the edge answered the requests asked of both paths."""
    return {
        "requests": len(pairs),
        "ranked_at_edge": sum(1 for p in pairs if p.ranked_here),
        "compared": len(compared(pairs)),
        "tier_edge_not_ranked_here": sum(
            1 for p in pairs if p.tier == "edge" and not p.ranked_here
        ),
        "tier_origin": sum(1 for p in pairs if p.tier == "origin"),
        "ranked_here_tier_not_edge": sum(1 for p in pairs if p.ranked_here and p.tier != "edge"),
        "edge_errors": sum(1 for p in pairs if not p.tier),
        "origin_errors": sum(1 for p in pairs if p.origin is None),
    }


def pool_figures(
    sizings: Sequence[Sizing], sizes: Sequence[int], rng: np.random.Generator
) -> dict[str, Any]:
    """Recall of the origin's top 20 and the edge code's means slate by pool size, and the
    real edge's means slate, all against the origin's means slate."""
    if not sizings:
        return {"users": 0, "recall": {}, "means_ratio": {}, "recommended_size": None}
    origin = float(sum(s.origin_clicks for s in sizings))
    recall_by = {size: float(np.mean([s.recall[size] for s in sizings])) for size in sizes}
    ratio_by = {size: sum(s.pool_clicks[size] for s in sizings) / origin for size in sizes}
    with_edge = [s for s in sizings if s.edge_clicks is not None]
    own = [s.own_recall for s in sizings if s.own_recall is not None]
    return {
        "users": len(sizings),
        "recall": {str(k): round(v, 4) for k, v in recall_by.items()},
        "recall_with_own_candidates": round(float(np.mean(own)), 4) if own else None,
        "means_ratio": {str(k): round(v, 4) for k, v in ratio_by.items()},
        "recommended_size": recommended_size(ratio_by, recall_by, TOLERANCE),
        "edge_means": ratio_block(
            [s.edge_clicks or 0.0 for s in with_edge], [s.origin_clicks for s in with_edge], rng
        ),
    }


def summary(
    pairs: Sequence[Pair],
    sizings: Sequence[Sizing],
    world: ShopWorld,
    args: argparse.Namespace,
    *,
    learning: dict[str, Any],
    seconds: dict[str, float],
    configuration: dict[str, Any],
) -> dict[str, Any]:
    """The run's figures, the JSON's shape."""
    rng = stream(args.seed, "bootstrap")
    slates = slate_figures(pairs, world, rng)
    ratio, ci = slates["ratio"], slates["ci95"]
    return {
        "benchmark": "edge_ranking_quality",
        "ratio": ratio,
        "ci95": ci,
        "goal": GOAL,
        "meets_goal": None if ratio is None else ratio >= GOAL,
        "ci_clears_goal": None if ci is None else ci[0] >= GOAL,
        "edge_clicks_per_slate": slates["edge_clicks_per_slate"],
        "baseline": {
            "path": "the origin's /v1/personalize, same requests, same run",
            "clicks_per_slate": slates["origin_clicks_per_slate"],
        },
        "oracle_clicks_per_slate": slates["oracle_clicks_per_slate"],
        "by_class": slates["by_class"],
        "counts": counts(pairs),
        "pools": pool_figures(sizings, args.pool_sizes, rng),
        "top": TOP,
        "learning": learning,
        "phase_seconds": seconds,
        "configuration": configuration,
        "world": {"items": args.items, "users": args.users},
        "requests": args.requests,
        "seed": args.seed,
    }


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ci(ci: list[float] | None) -> str:
    return "-" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def tables(result: dict[str, Any]) -> str:
    """The headline, the comparison by class, the counts and the pools, as printed."""
    verdict = {True: "met", False: "missed", None: "not measured"}[result["meets_goal"]]
    lines = [
        f"edge / origin expected clicks over the same requests: {_num(result['ratio'])} "
        f"{_ci(result['ci95'])} (goal >= {result['goal']}: {verdict}; the interval "
        f"{'clears' if result['ci_clears_goal'] else 'does not clear'} it)",
        "",
    ]
    rows: list[list[object]] = []
    for name, block in [("all", _all(result)), *result["by_class"].items()]:
        rows.append(
            [name, block["requests"], block["ranked_at_edge"],
             _num(block["edge_clicks_per_slate"]), _num(block["origin_clicks_per_slate"]),
             _num(block["ratio"]), _ci(block["ci95"])]
        )  # fmt: skip
    headers = ["users", "requests", "ranked at edge", "edge E[clicks]", "origin E[clicks]"]
    lines += [table([*headers, "ratio", "95% CI"], rows), ""]
    c = result["counts"]
    lines.append(
        f"requests {c['requests']:,}: ranked at the edge {c['ranked_at_edge']:,} (compared "
        f"{c['compared']:,}); tier 'edge' but not ranked there {c['tier_edge_not_ranked_here']:,}"
        f"; tier 'origin' {c['tier_origin']:,}; edge errors {c['edge_errors']}, origin errors "
        f"{c['origin_errors']}"
    )
    lines.append(f"oracle: {_num(result['oracle_clicks_per_slate'])} expected clicks per slate")
    phases = ", ".join(f"{name} {s:.0f} s" for name, s in result["phase_seconds"].items())
    lines.append(f"time: learning {result['learning']['seconds']:.0f} s, {phases}")
    pools = result["pools"]
    pool_rows = [
        [size + (" (recommended)" if int(size) == pools["recommended_size"] else ""),
         _num(pools["recall"][size]), _num(pools["means_ratio"][size])]
        for size in pools["recall"]
    ]  # fmt: skip
    lines += [
        "",
        f"pools, {pools['users']} users (each once), against the origin at exploration 0:",
        table(["pool size", f"recall of top {result['top']}", "means slate / origin's"], pool_rows),
    ]
    if pools.get("recall_with_own_candidates") is not None:
        lines.append(
            f"recall of top {result['top']} in the pool as filled joined with the user's own "
            f"candidates (what the edge ranks): {_num(pools['recall_with_own_candidates'])}"
        )
    edge_means = pools.get("edge_means")
    if edge_means:
        lines.append(
            f"the edge's own answer at exploration 0 / the origin's: {_num(edge_means['ratio'])} "
            f"{_ci(edge_means['ci95'])} over {edge_means['n']} users"
        )
    return "\n".join(lines)


def _all(result: dict[str, Any]) -> dict[str, Any]:
    c = result["counts"]
    return {
        "n": c["compared"],
        "requests": c["requests"],
        "ranked_at_edge": c["ranked_at_edge"],
        "edge_clicks_per_slate": result["edge_clicks_per_slate"],
        "origin_clicks_per_slate": result["baseline"]["clicks_per_slate"],
        "ratio": result["ratio"],
        "ci95": result["ci95"],
    }


def plot(path: Path, result: dict[str, Any]) -> None:
    """The ratio by class with its interval and the goal; recall and the means slate's
    ratio by pool size."""
    with plots.figure(
        path, "Ranking at the edge against the origin's ranking", panels=2, width=10, height=4.6
    ) as (left, right):
        blocks = [("all", _all(result)), *result["by_class"].items()]
        shown = [(name, b) for name, b in blocks if b["ratio"] is not None]
        for x, (_, block) in enumerate(shown):
            low, high = block["ci95"]
            ratio = block["ratio"]
            left.errorbar([x], [ratio], yerr=[[ratio - low], [high - ratio]], fmt="o", capsize=6)
        left.axhline(result["goal"], linestyle="--", color="red", linewidth=1, label="goal")
        left.axhline(1.0, color="grey", linewidth=0.8)
        left.set_xticks(range(len(shown)), [f"{n}\n({b['n']})" for n, b in shown])
        plots.labelled(
            left,
            "Same requests, both paths, same run",
            "user class (requests)",
            "edge / origin expected clicks (95% CI)",
        )
        pools = result["pools"]
        sizes = [int(s) for s in pools["recall"]]
        right.plot(
            sizes,
            list(pools["recall"].values()),
            marker="o",
            label=f"recall of top {result['top']}",
        )
        right.plot(
            sizes, list(pools["means_ratio"].values()), marker="s", label="means slate / origin's"
        )
        if pools["recommended_size"] is not None:
            right.axvline(
                pools["recommended_size"], linestyle=":", color="grey", label="recommended"
            )
        right.set_ylim(0, 1.1)
        plots.labelled(
            right, "What a segment's pool holds of a user's best", "pool size (items)", "share"
        )
