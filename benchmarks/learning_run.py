"""Driving a policy through the shop (``drive``) and choosing the baselines' settings on a
world of their own (``tune``), for ``benchmarks.learning``.

The loop is strictly sequential: a slate, its outcome, the policy learns, then the next
request. A learner that learns asynchronously (the product, through its feedback API)
may apply an outcome after later requests were served; that lag is part of what it is
measured on. Its lag is in seconds, so how many slates it spans depends on how fast the
slates come: a learner asked faster learns less per slate. ``slates_per_s`` paces a run
(no slate starts before its turn), so that two such learners compare at the same lag.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.click_model import expected_clicks, sample_outcome
from benchmarks.learning_policies import GRIDS, Config, build
from benchmarks.regret import WINDOWS, Figures, Trace, figures, regret_pct
from benchmarks.shop_world import Request, ShopWorld, WorldConfig, make_world, requests, stream
from benchmarks.slate_policy import Policy

# The tuning world's seed is the measured one's plus this: another catalog, other users,
# other requests, drawn the same way.
TUNING_SEED_OFFSET = 1_000


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


@dataclass(frozen=True, slots=True)
class Trial:
    config: Config
    cum_regret_pct: float | None
    seconds: float


async def tune(name: str, config: WorldConfig, seed: int, slates: int) -> list[Trial]:
    """Each configuration of ``GRIDS[name]`` run for ``slates`` slates on the tuning world
    (seed + ``TUNING_SEED_OFFSET``); the best (lowest cumulative regret) is the first."""
    tuning_seed = seed + TUNING_SEED_OFFSET
    world = make_world(config, tuning_seed)
    stream_of_requests = requests(world, slates, tuning_seed)
    trials = []
    for candidate in GRIDS[name]:
        policy = await build(name, world, tuning_seed, candidate)
        try:
            trace = await drive(world, policy, stream_of_requests, tuning_seed)
        finally:
            await policy.aclose()
        trials.append(Trial(candidate, regret_pct(trace.regret, trace.oracle), trace.seconds))
    return sorted(
        trials, key=lambda t: float("inf") if t.cum_regret_pct is None else t.cum_regret_pct
    )


def describe(config: Config) -> dict[str, object] | None:
    return None if config is None else dataclasses.asdict(config)
