"""Driving a policy through the shop (``drive``, ``run_policy``), and the baselines of one
(world, seed) in a process of their own (``run_baselines``), for ``benchmarks.learning``.

The loop is strictly sequential: a slate, its outcome, the policy learns, then the next
request. A learner that learns asynchronously (the product, through its feedback API)
may apply an outcome after later requests were served; that lag is part of what it is
measured on. Its lag is in seconds, so how many slates it spans depends on how fast the
slates come: a learner asked faster learns less per slate. ``slates_per_s`` paces a run
(no slate starts before its turn), so that the product's runs compare at the same lag.

``run_baselines`` is what the separate process runs: it rebuilds the world from its
configuration and seed (the world is a function of the two, so the child's is the parent's)
and returns each baseline's run, traces included; the baselines learn at once and run
unpaced, beside the product's paced runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from benchmarks.click_model import expected_clicks, sample_outcome
from benchmarks.learning_policies import BaselineConfig, Config, build
from benchmarks.regret import WINDOWS, Figures, Trace, figures
from benchmarks.shop_world import Request, ShopWorld, WorldConfig, make_world, requests, stream
from benchmarks.slate_policy import Policy


async def drive(
    world: ShopWorld,
    policy: Policy,
    stream_of_requests: Sequence[Request],
    seed: int,
    slates_per_s: float | None = None,
) -> Trace:
    """Serve every request through ``policy`` and account each slate's regret, at most
    ``slates_per_s`` slates a second (None: as fast as the policy answers). Outcomes are
    drawn from the policy's own stream (``stream(seed, "outcomes", name)``)."""
    rng = stream(seed, "outcomes", policy.name)
    n = len(stream_of_requests)
    regret, oracle, clicks = np.empty(n), np.empty(n), np.empty(n)
    click_model = world.config.click
    started = time.perf_counter()
    for served, request in enumerate(stream_of_requests):
        if slates_per_s is not None:
            wait = started + served / slates_per_s - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
        slate = await policy.slate(request)
        rows = world.rows(slate)
        attract = world.attract[request.user, rows]
        outcome = sample_outcome(rng, attract, world.examine, click_model)
        await policy.learn(request, slate, outcome)
        best = float(world.oracle_clicks[request.user])
        oracle[served] = best
        regret[served] = best - expected_clicks(attract, world.examine)
        clicks[served] = float(outcome.clicked.sum())
    return Trace(regret=regret, oracle=oracle, clicks=clicks, seconds=time.perf_counter() - started)


@dataclass(frozen=True, slots=True)
class PolicyRun:
    """One policy's run: its trace and figures, or why it has none."""

    name: str
    configuration: dict[str, Any]
    trace: Trace | None
    figures: Figures | None
    missing: str | None = None


async def run_policy(
    name: str,
    config: Config,
    world: ShopWorld,
    stream_of_requests: Sequence[Request],
    *,
    seed: int,
    total: int,
    slates_per_s: float | None = None,
) -> PolicyRun:
    """A policy through ``stream_of_requests`` (the run's first requests, ``total`` in
    all), paced at ``slates_per_s``, or why it could not run."""
    try:
        policy = await build(name, world, seed, config)
    except ImportError as exc:
        reason = f"{exc.name or 'a package'} is not installed (make bench-deps); figures null"
        return PolicyRun(name, describe(config) or {}, None, None, reason)
    try:
        trace = await drive(world, policy, stream_of_requests, seed, slates_per_s)
    finally:
        await policy.aclose()
    return PolicyRun(name, policy.configuration(), trace, figures(trace, total, WINDOWS))


def run_baselines(
    config: WorldConfig, seed: int, slates: int, configs: Mapping[str, BaselineConfig]
) -> list[PolicyRun]:
    """Every baseline of ``configs`` through the world of (``config``, ``seed``) and its
    first ``slates`` requests, one after the other, unpaced: the separate process's work."""
    # Small matrices, one request at a time: BLAS threads would only add overhead.
    threadpool_limits(limits=1, user_api="blas")
    world = make_world(config, seed)
    stream_of_requests = requests(world, slates, seed)

    async def run_all() -> list[PolicyRun]:
        return [
            await run_policy(name, chosen, world, stream_of_requests, seed=seed, total=slates)
            for name, chosen in configs.items()
        ]

    return asyncio.run(run_all())


def describe(config: Config) -> dict[str, object] | None:
    return None if config is None else dataclasses.asdict(config)
