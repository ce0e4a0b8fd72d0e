"""Offline evaluation against the online truth, in one run (issue 19): the product's own
estimates of three candidate policies, from the decisions its live policy logged on the
simulated shop, beside what each candidate actually earned when it served.

Per seed: a stack (``benchmarks.perso_policy``: embedded Redis, the origin, stream workers)
serves the shop's catalog (``benchmarks.shop_world``), every slate asked of the origin's
HTTP API and every click told to it. The live policy and the log are the shipped ones
(issue 31): the default ranking policy (exploration 0.05) and the shipped context log rate
(``PERSO_CONTEXT_LOG_RATE``, 0.1: a tenth of the decisions can be replayed). The one setting
changed is time: a reward wait of 2 s (``REWARD_WAIT_S``) instead of a shop's 30, printed
with the run.

1. Warm-up: ``--warm`` slates of the live policy, so that the posteriors are past their
   first steps.
2. The experiment: ``--slates`` more, each request assigned at random to the live policy
   (half) or one of the three candidates (a sixth each), by the request's own options
   (``exploration_rate``, ``diversity_weight``). The arms interleave, so all four rank
   from the same learnt state as it moves; a candidate's online truth is the mean expected
   clicks of its own slates (``shop_world``: from the hidden click model, not the sampled
   clicks, so that the truth has little noise), with its standard error.
3. Offline: once the joins have closed, the live arm's logged decisions are read from the
   stack's Redis (``origin.offline.window``: decision, context and reward logs, joined), and
   each candidate is estimated on them (``evaluation.offline``), as ``perso evaluate`` does.

Reported per candidate and seed: IPS, SNIPS, DR and the direct method (DM: the reward
model alone, the textbook baseline), each with its 95% bootstrap interval, and the online
truth; over everything, each estimator's mean absolute relative error and its intervals'
coverage of the truth. The truth is itself a mean of a few thousand slates: an interval
covers it when the two agree within both uncertainties (each side of the interval widened by
1.96 times the truth's standard error, in quadrature); coverage of the bare point is
reported beside. The estimator that heads the report is stated before the run
(``--estimator``, DR by default, the one ``perso evaluate`` leads with), never chosen after
it; the targets (issue 19: mean absolute relative error ≤ 10%, coverage ≥ 90%) are judged
for each of IPS, SNIPS and DR. The baseline ratio is DR's error over DM's.

Run: ``.venv/bin/python -m benchmarks.offline_eval [--seeds 3] [--warm 2000] [--slates
24000] [--estimator dr]``. Writes ``offline_eval.json`` and ``offline_eval.png`` to
``--out`` (default ``.perso/bench/offline_eval``).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.backlog import wait_settled
from benchmarks.click_model import expected_clicks, sample_outcome
from benchmarks.perso_policy import PersoConfig, PersoPolicy, personalize_body, started
from benchmarks.report import save_and_finish
from benchmarks.shop_world import Request, ShopWorld, WorldConfig, make_world, requests, stream
from config.settings import Settings, configured_policy
from evaluation.offline import ESTIMATOR_NAMES, Evaluation, evaluate
from origin.offline.window import read_window
from perso import plots
from protocol.policies import Policy, PolicyConfig
from redis_client.client import connect

# The one setting changed from the shipped defaults: time (a shop waits 30 s for rewards).
REWARD_WAIT_S = 2.0
OVERRIDES = {"reward_wait_s": REWARD_WAIT_S, "reward_grace_s": REWARD_WAIT_S / 3}
# The live policy: the one the shipped settings configure.
SHIPPED = configured_policy(Settings())
LIVE = Policy("live", "1", SHIPPED.config)
SELF_CHECK = Policy("live-replayed", "1", LIVE.config)
# The estimators the targets are judged for (DM, the baseline, is reported beside them).
JUDGED = ("ips", "snips", "dr")
# A normal 95% interval's half-width in standard errors (the truth's, added in quadrature).
Z95 = 1.96


@dataclass(frozen=True)
class Arm:
    policy: Policy
    options: dict[str, float]  # the request's options that make it this policy


CANDIDATES = (
    Arm(
        Policy("explore-0.1", "1", PolicyConfig(exploration_weight=0.1)), {"exploration_rate": 0.1}
    ),
    Arm(Policy("greedy", "1", PolicyConfig(exploration_weight=0.0)), {"exploration_rate": 0.0}),
    Arm(
        Policy(
            "diverse-0.3",
            "1",
            PolicyConfig(exploration_weight=LIVE.config.exploration_weight, diversity_weight=0.3),
        ),
        {"diversity_weight": 0.3},
    ),
)
LIVE_SHARE = 0.5
TARGET_MARE = 0.10
TARGET_COVERAGE = 0.90
SETTLE_S = 90.0
BOOTSTRAP = 500


@dataclass
class ArmRun:
    request_ids: list[str] = field(default_factory=list)
    expected: list[float] = field(default_factory=list)


class OriginDriver:
    """Slates from the stack's origin, outcomes told to it: the origin ranks every one (an
    edge's cached answer would be a decision without a context of its own)."""

    def __init__(self, policy: PersoPolicy, world: ShopWorld, seed: int) -> None:
        endpoints = policy.endpoints
        self._url = endpoints.origin_url
        self._headers = {"authorization": f"Bearer {endpoints.origin_token}"}
        self._client = httpx.AsyncClient(timeout=10.0, headers=self._headers)
        self._world = world
        self._outcomes = stream(seed, "outcomes", "offline-eval")
        self.errors = 0

    async def serve(self, request: Request, options: dict[str, float]) -> tuple[str, float] | None:
        """One slate and its outcome: the answer's request id and the slate's expected
        clicks; None when the origin did not answer."""
        body = personalize_body(request)
        if options:
            body["options"] = dict(options)
        response = await self._client.post(f"{self._url}/v1/personalize", json=body)
        if response.status_code != 200:
            self.errors += 1
            return None
        answer = response.json()
        slate = [str(item["item_id"]) for item in answer["items"]][: request.count]
        rows = self._world.rows(slate)
        attract = self._world.attract[request.user, rows]
        outcome = sample_outcome(
            self._outcomes, attract, self._world.examine, self._world.config.click
        )
        events = [
            {"item_id": item, "action": "click", "position": position}
            for position, item in enumerate(slate)
            if outcome.clicked[position]
        ]
        if events:
            feedback = {
                "user_id": request.user_id,
                "session_id": f"s-{request.user_id}",
                "request_id": answer["request_id"],
                "feedback": events,
            }
            sent = await self._client.post(f"{self._url}/v1/feedback", json=feedback)
            if sent.status_code != 200:
                self.errors += 1
        return str(answer["request_id"]), expected_clicks(attract, self._world.examine)

    async def aclose(self) -> None:
        await self._client.aclose()


async def one_seed(seed: int, args: argparse.Namespace) -> dict[str, Any]:
    world = make_world(WorldConfig(), seed)
    config = PersoConfig(overrides=OVERRIDES)
    policy = await started(world, config, name="offline-eval")
    driver = OriginDriver(policy, world, seed)
    try:
        stream_of_requests = requests(world, args.warm + args.slates, seed)
        assign = stream(seed, "arms")
        arms: dict[str, ArmRun] = {
            LIVE.name: ArmRun(),
            **{a.policy.name: ArmRun() for a in CANDIDATES},
        }
        started_at = time.perf_counter()
        for n, request in enumerate(stream_of_requests):
            arm: Arm | None = None
            if n >= args.warm and assign.random() >= LIVE_SHARE:
                arm = CANDIDATES[int(assign.integers(len(CANDIDATES)))]
            served = await driver.serve(request, arm.options if arm else {})
            if served is not None and n >= args.warm:
                run = arms[arm.policy.name if arm else LIVE.name]
                run.request_ids.append(served[0])
                run.expected.append(served[1])
        serve_s = time.perf_counter() - started_at
        settings = policy.settings
        redis = connect(policy.redis_url)
        try:
            wait = settings.reward_wait_s + settings.reward_grace_s
            await asyncio.sleep(wait)
            await wait_settled(redis, settings.event_partitions, SETTLE_S)
            await asyncio.sleep(wait)
            live_ids = set(arms[LIVE.name].request_ids)
            window = await read_window(
                redis,
                settings.event_partitions,
                since_ms=0,
                until_ms=int(time.time() * 1000),
                limit=len(live_ids),
                dim=settings.embedding_dim,
                accept=lambda d: d.request_id in live_ids,
            )
        finally:
            await redis.aclose()
        rng = np.random.default_rng(seed)
        offline_started = time.perf_counter()
        # The live policy itself among the candidates: a check that replay reproduces what
        # was logged (its estimates should match its own on-policy clicks).
        candidates = [a.policy for a in CANDIDATES] + [SELF_CHECK]
        result = evaluate(window.records, LIVE, candidates, rng, samples=BOOTSTRAP)
        timing = {
            "serve_s": round(serve_s, 1),
            "offline_s": round(time.perf_counter() - offline_started, 1),
            "errors": driver.errors,
        }
        return report_seed(seed, result, arms, window.counts.joined) | timing
    finally:
        await driver.aclose()
        await policy.aclose()


def report_seed(
    seed: int, result: Evaluation, arms: dict[str, ArmRun], joined: int
) -> dict[str, Any]:
    candidates = []
    check: dict[str, float] = {}
    for c in result.candidates:
        if c.policy is SELF_CHECK:
            check = {e.estimator: round(e.value, 4) for e in c.estimates}
            continue
        expected = arms[c.policy.name].expected
        truth = float(np.mean(expected))
        se = float(np.std(expected) / np.sqrt(len(expected)))
        estimates = {
            e.estimator: {
                "value": round(e.value, 4),
                "low": round(e.low, 4),
                "high": round(e.high, 4),
                "relative_error": round(abs(e.value - truth) / truth, 4),
                "covers": covers(e.value, e.low, e.high, truth, se),
                "covers_point": bool(e.low <= truth <= e.high),
            }
            for e in c.estimates
        }
        candidates.append(
            {
                "policy": c.policy.name,
                "online_truth": round(truth, 4),
                "online_truth_se": round(se, 4),
                "online_slates": len(arms[c.policy.name].expected),
                "estimates": estimates,
                "ess": round(c.estimates[0].ess, 1),
                "support": round(c.support, 3),
                "warnings": list(c.warnings),
            }
        )
    live_truth = float(np.mean(arms[LIVE.name].expected))
    return {
        "seed": seed,
        "live": {
            "online_truth": round(live_truth, 4),
            "on_policy_clicks": round(result.on_policy.value, 4),
            "replayed_as_candidate": check,
            "slates": len(arms[LIVE.name].expected),
            "evaluated": joined,
        },
        "candidates": candidates,
    }


def covers(value: float, low: float, high: float, truth: float, truth_se: float) -> bool:
    """Whether an estimate's interval ``[low, high]`` agrees with an online truth measured
    with standard error ``truth_se``: each side of the interval widened in quadrature by the
    truth's own 95% half-width (with ``truth_se`` 0, the plain test of the point)."""
    margin = Z95 * truth_se
    below = float(np.hypot(value - low, margin))
    above = float(np.hypot(high - value, margin))
    return value - below <= truth <= value + above


def summary(seeds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ESTIMATOR_NAMES:
        rows = [c["estimates"][name] for s in seeds for c in s["candidates"]]
        mare = round(float(np.mean([r["relative_error"] for r in rows])), 4)
        coverage = round(float(np.mean([r["covers"] for r in rows])), 3)
        out[name] = {
            "mare": mare,
            "coverage": coverage,
            "coverage_of_point": round(float(np.mean([r["covers_point"] for r in rows])), 3),
            "intervals": len(rows),
            "target_met": mare <= TARGET_MARE and coverage >= TARGET_COVERAGE,
        }
    return out


def plot(path: Path, seeds: list[dict[str, Any]]) -> None:
    """Each estimator's estimates with their 95% intervals against the online truth."""
    truths = [c["online_truth"] for s in seeds for c in s["candidates"]]
    low, high = min(truths) * 0.7, max(truths) * 1.3
    markers = {a.policy.name: m for a, m in zip(CANDIDATES, "os^", strict=True)}
    colours = {a.policy.name: f"C{n}" for n, a in enumerate(CANDIDATES)}
    with plots.figure(
        path,
        "Offline estimates from the live policy's log vs the candidates' online truth "
        "(expected clicks per slate)",
        panels=len(ESTIMATOR_NAMES),
        width=3.4 * len(ESTIMATOR_NAMES),
        height=4.2,
    ) as axes:
        for ax, name in zip(axes, ESTIMATOR_NAMES, strict=True):
            for s in seeds:
                for c in s["candidates"]:
                    e = c["estimates"][name]
                    ax.errorbar(
                        c["online_truth"],
                        e["value"],
                        yerr=[[e["value"] - e["low"]], [e["high"] - e["value"]]],
                        fmt=markers[c["policy"]],
                        color=colours[c["policy"]],
                        capsize=3,
                        label=c["policy"] if s is seeds[0] and ax is axes[0] else None,
                    )
            ax.plot([low, high], [low, high], "k--", linewidth=0.8)
            ax.set_xlim(low, high)
            ax.set_ylim(low, high)
            plots.labelled(
                ax,
                name.upper(),
                "online truth",
                "offline estimate, 95% interval" if ax is axes[0] else "",
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--warm", type=int, default=2000)
    # At the shipped context log rate a tenth of the live half is replayable: 24,000 slates
    # give about 1,200 logged decisions a seed.
    parser.add_argument("--slates", type=int, default=24000)
    parser.add_argument(
        "--estimator",
        choices=JUDGED,
        default="dr",
        help="the estimator that heads the report, stated before the run",
    )
    parser.add_argument("--out", type=Path, default=Path(".perso/bench/offline_eval"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    started_at = time.perf_counter()
    print(
        f"live policy: the shipped one (exploration {LIVE.config.exploration_weight}), the "
        f"shipped context log rate ({Settings().context_log_rate}); changed for the run: "
        f"{OVERRIDES}; heading the report: {args.estimator} (targets judged for "
        f"{', '.join(JUDGED)})",
        flush=True,
    )
    seeds = []
    for seed in range(1, args.seeds + 1):
        seeds.append(asyncio.run(one_seed(seed, args)))
        s = seeds[-1]
        for c in s["candidates"]:
            est = "  ".join(
                f"{n} {c['estimates'][n]['value']:.3f}{'' if c['estimates'][n]['covers'] else '!'}"
                for n in ESTIMATOR_NAMES
            )
            print(f"seed {seed} {c['policy']:<12} truth {c['online_truth']:.3f}  {est}", flush=True)
    figures = summary(seeds)
    head = figures[args.estimator]
    result: dict[str, Any] = {
        "benchmark": "offline_eval",
        "world": {"items": WorldConfig().items, "users": WorldConfig().users},
        "warm_slates": args.warm,
        "experiment_slates": args.slates,
        "live_exploration": LIVE.config.exploration_weight,
        "context_log_rate": Settings().context_log_rate,
        "overrides": OVERRIDES,
        "estimators": figures,
        "estimator": args.estimator,
        "mare": head["mare"],
        "coverage": head["coverage"],
        "target_mare": TARGET_MARE,
        "target_coverage": TARGET_COVERAGE,
        "targets_met": {name: figures[name]["target_met"] for name in JUDGED},
        "baseline": "dm",
        "baseline_mare": figures["dm"]["mare"],
        "ratio_dr_to_dm_mare": round(figures["dr"]["mare"] / max(figures["dm"]["mare"], 1e-9), 3),
        "seeds": seeds,
    }
    json_path, png_path = args.out / "offline_eval.json", args.out / "offline_eval.png"
    plot(png_path, seeds)
    save_and_finish(result, json_path, png_path, started_at)


if __name__ == "__main__":
    main()
