"""Running ``benchmarks.learning`` over the family: for each world and seed, the same world
and requests for every policy; the product's runs one after the other in this process,
paced at the world's pace, and that (world, seed)'s baselines meanwhile in one separate
process (``learning_run.run_baselines``, started by "forkserver" or "spawn": a fresh
interpreter that rebuilds the world from its configuration and seed, never a fork of this
process's event loop and HTTP clients). A line is printed per finished run.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from benchmarks.learning_family import Shop
from benchmarks.learning_policies import BASELINES, CHOSEN, PRODUCT, product_config
from benchmarks.learning_report import WorldRuns, describe_world, truth
from benchmarks.learning_run import PolicyRun, run_baselines, run_policy
from benchmarks.shop_world import make_world, requests


def _context() -> Any:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _stop(pool: ProcessPoolExecutor) -> None:
    """Stop the separate process at once (its baselines' work is lost with the run).
    ``_processes`` is private; the executor offers no other handle before Python 3.14."""
    processes = list(getattr(pool, "_processes", {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()


def _line(world: str, seed: int, run: PolicyRun, seconds: float | None = None) -> str:
    head = f"{world} seed {seed} {run.name}"
    f = run.figures
    if f is None:
        return f"{head}: {run.missing}"
    extra = "" if seconds is None else f" ({seconds - f.seconds:.0f} s to start)"
    cum = "-" if f.cum_regret_pct is None else f"{f.cum_regret_pct:.1f}%"
    final = "-" if f.final_regret_pct is None else f"{f.final_regret_pct:.1f}%"
    return (
        f"{head}: {f.slates:,} slates in {f.seconds:.1f} s{extra}, regret {final} in the "
        f"last tenth, {cum} cumulative"
    )


async def measure_seed(
    pool: ProcessPoolExecutor,
    shop: Shop,
    seed: int,
    *,
    slates: int,
    policies: Sequence[str],
    overrides: Mapping[str, Any],
) -> tuple[list[PolicyRun], dict[str, float]]:
    """Every policy on (``shop``, ``seed``): their runs in ``policies``' order, and the
    truth of the world and its requests."""
    world = make_world(shop.config, seed)
    asked = requests(world, slates, seed)
    done: dict[str, PolicyRun] = {}
    configs = {name: CHOSEN[shop.name][name] for name in policies if name in BASELINES}
    baselines: asyncio.Future[list[PolicyRun]] | None = None
    if configs:
        submitted: Future[list[PolicyRun]] = pool.submit(
            run_baselines, shop.config, seed, slates, configs
        )
        baselines = asyncio.wrap_future(submitted)

        def report(finished: asyncio.Future[list[PolicyRun]]) -> None:
            if not finished.cancelled() and finished.exception() is None:
                for run in finished.result():
                    print(_line(shop.name, seed, run), flush=True)

        baselines.add_done_callback(report)
    for name in (p for p in policies if p in PRODUCT):
        started = time.perf_counter()
        run = await run_policy(
            name,
            product_config(name, overrides),
            world,
            asked,
            seed=seed,
            total=slates,
            slates_per_s=shop.pace,
        )
        print(_line(shop.name, seed, run, time.perf_counter() - started), flush=True)
        done[name] = run
    if baselines is not None:
        done |= {run.name: run for run in await baselines}
    return [done[name] for name in policies if name in done], truth(world, [r.user for r in asked])


async def measure(
    shops: Sequence[Shop],
    seeds: Sequence[int],
    policies: Sequence[str],
    overrides: Mapping[str, Any],
    slates: int | None,
) -> list[WorldRuns]:
    """Every world of ``shops`` on every seed (``slates``: instead of each world's own)."""
    pool = ProcessPoolExecutor(max_workers=1, mp_context=_context())
    try:
        measured = []
        for shop in shops:
            count = shop.slates if slates is None else slates
            runs: dict[int, list[PolicyRun]] = {}
            truths: dict[int, dict[str, float]] = {}
            for seed in seeds:
                runs[seed], truths[seed] = await measure_seed(
                    pool, shop, seed, slates=count, policies=policies, overrides=overrides
                )
            measured.append(WorldRuns(shop, describe_world(shop, truths, count), runs))
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown(wait=True)
    return measured
