"""``perso evaluate``: candidate policies estimated on a window of the decision log."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict

import numpy as np
from redis.exceptions import RedisError

from config.settings import ConfigError, Settings, configured_policy
from evaluation.offline import Evaluation, Propensities, evaluate
from evaluation.shadow import compare
from origin.offline import last_evaluation
from origin.offline.report import as_json, text
from origin.offline.shadow import read_shadow
from origin.offline.window import Window, read_window
from origin.policies.registry import PolicyRegistry
from protocol.decisions import Decision
from protocol.exceptions import MalformedMessage
from protocol.policies import Policy
from protocol.policy_specs import REFERENCES, inline, is_inline
from redis_client.client import RedisClient

_SPAN = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--since",
        default="24h",
        help="window start: a span back from now (30m, 6h, 7d) "
        "or milliseconds since the epoch (default 24h)",
    )
    parser.add_argument("--until", default=None, help="window end, the same way (default now)")
    parser.add_argument(
        "--limit", type=int, default=20_000, help="newest joined decisions at most (20000)"
    )
    parser.add_argument(
        "--candidate",
        action="append",
        default=[],
        metavar="SPEC",
        help="a candidate: random, popular, a registered policy (name, name@version), or "
        "name:knob=value,... (knobs: exploration_weight, diversity_weight, emotion_rules, "
        "user_prior_scale, kind); repeatable (default: random and popular)",
    )
    parser.add_argument(
        "--live",
        default=None,
        metavar="SPEC",
        help="the logging policy, as --candidate, when the window's is not registered here",
    )
    parser.add_argument(
        "--propensities",
        choices=[p.value for p in Propensities],
        default="replayed",
        help="the live policy's propensities: replayed on each context (default) or as logged",
    )
    parser.add_argument("--samples", type=int, default=1000, help="bootstrap samples (1000)")
    parser.add_argument("--seed", type=int, default=0, help="the replays' and bootstrap's seed")
    parser.add_argument(
        "--shadow",
        default=None,
        metavar="NAME",
        help="compare the shadow policy NAME (PERSO_SHADOW_POLICY) with the live one on the "
        "newest shadowed decisions whose joins closed, instead of replaying candidates",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def moment_ms(value: str, now_ms: int) -> int:
    """A window bound: ``<n><s|m|h|d>`` back from ``now_ms``, or epoch milliseconds."""
    match = _SPAN.match(value.strip())
    if match:
        return now_ms - int(float(match[1]) * _UNIT_S[match[2]] * 1000)
    if value.strip().isdigit():
        return int(value)
    raise ConfigError(f"{value!r} is neither a span like 6h nor epoch milliseconds")


async def resolved(spec: str, registry: PolicyRegistry) -> Policy:
    """A candidate: a reference (``random``, ``popular``), a registered policy (``name`` for
    its newest version, ``name@version``) or one written inline (``name:knob=value,...``)."""
    if is_inline(spec):
        try:
            return inline(spec)
        except MalformedMessage as exc:
            raise ConfigError(str(exc)) from exc
    name, _, version = spec.partition("@")
    policy = await registry.get(name, version or None)
    if policy is None:
        raise ConfigError(
            f"candidate {spec!r}: no such policy (define it with PUT /v1/admin/policies/{name}, "
            "or write it inline as name:knob=value,...)"
        )
    return policy


async def live_policy(window: Window, registry: PolicyRegistry, explicit: str | None) -> Policy:
    """The policy that logged most of the window's decisions (``explicit``: the one given)."""
    if explicit is not None:
        return await resolved(explicit, registry)
    if not window.counts.policies:
        raise ConfigError("no decision to evaluate in the window")
    label = max(window.counts.policies, key=lambda k: window.counts.policies[k])
    name, _, version = label.partition("/")
    if name in REFERENCES:
        return REFERENCES[name]
    policy = await registry.get(name, version)
    if policy is None:
        raise ConfigError(
            f"the window was logged by {label}, which is not registered here: pass --live"
        )
    return policy


async def run(settings: Settings, redis: RedisClient, args: argparse.Namespace) -> int:
    if args.shadow is not None:
        return await run_shadow(settings, redis, args)
    now_ms = int(time.time() * 1000)
    result, window = await evaluate_window(
        settings,
        redis,
        args.candidate,
        since_ms=moment_ms(args.since, now_ms),
        until_ms=now_ms if args.until is None else moment_ms(args.until, now_ms),
        limit=args.limit,
        live_spec=args.live,
        propensities=Propensities(args.propensities),
        samples=args.samples,
        seed=args.seed,
    )
    report = as_json(result, window.counts)
    print(json.dumps(report) if args.json else text(result, window.counts))
    try:
        # The operations page shows the last run (origin /metrics: perso_evaluation_last_*).
        await last_evaluation.store(redis, last_evaluation.summary(report, now_ms))
    except (RedisError, OSError) as exc:
        print(f"(the report was not kept for the operations page: {exc})", file=sys.stderr)
    return 0


async def evaluate_window(
    settings: Settings,
    redis: RedisClient,
    specs: Sequence[str],
    *,
    since_ms: int,
    until_ms: int,
    limit: int,
    live_spec: str | None = None,
    propensities: Propensities = Propensities.REPLAYED,
    samples: int = 1000,
    seed: int = 0,
) -> tuple[Evaluation, Window]:
    """The candidates ``specs`` (``resolved``; none: the references) estimated on the window
    of the logs in Redis; ``ConfigError`` when there is nothing to estimate them on."""
    registry = PolicyRegistry(redis, configured_policy(settings))
    candidates = [await resolved(spec, registry) for spec in specs] or list(REFERENCES.values())
    window = await read_window(
        redis,
        settings.event_partitions,
        since_ms=since_ms,
        until_ms=until_ms,
        limit=limit,
        dim=settings.embedding_dim,
    )
    live = await live_policy(window, registry, live_spec)
    if live_spec is None:  # the decisions of the live policy's own version only
        label = live.label
        window = Window([r for r in window.records if _label(r.decision) == label], window.counts)
    if not window.records:
        raise ConfigError(
            f"none of the {window.counts.decisions} decisions in the window has both a logged "
            "context and a closed join (PERSO_CONTEXT_LOG_RATE samples contexts; a join "
            "closes after its reward window)"
        )
    rng = np.random.default_rng(seed)
    result = evaluate(
        window.records, live, candidates, rng, propensities=propensities, samples=samples
    )
    return result, window


async def run_shadow(settings: Settings, redis: RedisClient, args: argparse.Namespace) -> int:
    records, rewards = await read_shadow(
        redis, settings.event_partitions, args.shadow, limit=args.limit
    )
    result = compare(records, rewards, np.random.default_rng(args.seed), args.samples)
    if result is None:
        raise ConfigError(
            f"no shadowed decision of {args.shadow!r} has closed its join yet "
            f"({len(records)} shadow records read; is PERSO_SHADOW_POLICY set on the origin?)"
        )
    if args.json:
        print(json.dumps(asdict(result)))
        return 0
    print(
        f"shadow {result.policy} beside live {result.live}, on {result.decisions:,} shadowed "
        f"decisions whose joins closed:\n"
        f"  live:   {result.live_value:.3f} engagements per slate (on-policy)\n"
        f"  shadow: {result.shadow_snips:.3f} [{result.low:.3f}, {result.high:.3f}] "
        f"(SNIPS, 95% bootstrap; IPS {result.shadow_ips:.3f}; ESS {result.ess:.0f})"
    )
    return 0


def _label(d: Decision) -> str:
    return f"{d.policy}/{d.policy_version}"
