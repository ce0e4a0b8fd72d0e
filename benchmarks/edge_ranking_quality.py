"""Ranking at the edge against the origin's ranking, in the same run (issue 18): do the
slates an edge ranks from its segment's pool earn what the origin's earn for the same
requests, and how much of a user's personal top items do the pools hold.

1. **Learning.** A stack (``benchmarks.perso_policy``: embedded Redis, the origin, one
   stream worker, one edge; the shipped settings)
   serves ``benchmarks.learning``'s simulated shop (``benchmarks.shop_world``: hidden
   tastes, position-biased clicks) through the edge, slates and feedback, for ``--learn``
   requests, so that the users' models and the items' posteriors have learnt.
2. **Freeze.** Once the workers have applied everything (streams drained, every
   decision's reward window closed) they are stopped: nothing learnt changes after.
   Otherwise every answer of the next phases, getting no feedback, would be closed as
   ignored and move posteriors and models between one path's answer and the other's.
3. **Slates.** ``--requests`` more requests of the same population (drawn as the learning
   ones were, by request rate), no feedback: each asked of the edge (with the user's token,
   as a browser asks) and then of the origin's own ``/v1/personalize`` (with the service
   token, through the edge's origin client; the user's audience, 10 items), both at the
   stack's exploration. Each slate earns its expected clicks under the hidden tastes
   (``click_model.expected_clicks``). An edge answer counts as ranked there when the edge's
   ``ranked_here`` counter moved while it answered (``metadata.tier`` says so too since
   issue 29; the counter also checks it); the others (users the edge counts as
   casual get their segment's shared answer) are counted and left out. Figure: the edge's
   expected clicks summed over the requests it ranked / the origin's for the same requests,
   with a paired bootstrap interval (``benchmarks.paired_ratio``), by activity class too.
   Goal: at least 0.97.
4. **Pools.** For each user of those requests, once: the origin's personal top 20 at
   exploration 0 (its posterior means), and the pool the origin builds for the user's
   segment key (``POST /v1/internal/pools``, asked as the edge asks it: the request, 50
   items, explanations). Pools of 50-500 are read off that pool exactly
   (``benchmarks.pool_sizing``: the origin keeps the answer's items, then the best by
   optimistic score, and sends them in that order; 500 is every candidate of the
   segment's retrieval, so larger pools need more candidates). Per size: recall (the share
   of the top 20 in the pool) and the expected clicks of the slate the edge's code
   (``edge.ranking.pool_ranking``) ranks from it at exploration 0 for the user's model (``GET
   /v1/internal/users/{id}/state``), over the origin's first 10 at exploration 0. The
   recommended size is the smallest within 0.01 of the 500-pool on both. Beside them the
   real edge's answer at exploration 0 against the same origin slate. And the recall of
   what the edge ranks a known user from: the pool as filled joined with the user's own
   candidates (``edge.ranking.own_candidates``: of the ``PERSO_EDGE_OWN_CANDIDATES`` items
   nearest their model under the pool's population prior, from the catalog's vectors as
   an edge reads and holds them, those the origin sends as rows of the pool with an
   engagement posterior over all contexts).

Settings: the shipped defaults (ranking at the edge, exploration, reward wait, pool TTL,
freshness tiers), the learning phase paced at ``--pace`` slates a second (60, the learning
family's); ``--set NAME=VALUE`` (repeatable) changes one, and the run prints every change.
Before issue 29 it ran with ``benchmarks.perso_policy``'s compressed time (a 3 s reward
wait, 6 s pools, the tiers off, hashed titles), unpaced.

What it leaves out: the age of pools and models. Frozen, the edge ranks from posteriors at
most one pool refresh old, with the workers' last models; while the stack learns, pools
age up to ``PERSO_EDGE_POOL_TTL_S`` (60 s) and models by the sync stream's lag.
``benchmarks.learning`` (``perso``, asked at the edge, against ``perso_origin``) measures
that cost.

Run: ``.venv/bin/python -m benchmarks.edge_ranking_quality [--learn 6000] [--requests
1500] [--users 300] [--items 2000] [--seed 1] [--pace 60] [--set NAME=VALUE] [--out
DIR]``. Writes ``edge_ranking_quality.json`` and ``.png`` to ``--out`` (default
``.perso/bench/edge_ranking_quality``). Measured figures: docs/measured.md.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from benchmarks.click_model import expected_clicks
from benchmarks.edge_ranking_report import TOP, Pair, Sizing, plot, summary, tables
from benchmarks.learning_run import drive
from benchmarks.perso_policy import (
    PersoConfig,
    PersoPolicy,
    parse_setting,
    personalize_body,
    started,
)
from benchmarks.pool_sizing import means_slate, pool_at_size, recall, restricted
from benchmarks.regret import WINDOWS, figures
from benchmarks.report import machine, save_and_finish
from benchmarks.shop_world import Request, ShopWorld, WorldConfig, make_world, requests
from config.settings import Settings, configured_policy
from edge.exceptions import OriginRejected, OriginUnavailable
from edge.origins.client import OriginClient
from edge.ranking.item_vectors import ItemVectorTable
from edge.serve.fill import as_fill
from protocol.api import PersonalizeRequest
from protocol.audience import Personal, Shared
from protocol.exceptions import MalformedMessage
from protocol.pools import Pool, PoolItemsRequest
from protocol.segments import Segment
from relevance.population import as_ranked, population_from_bytes
from relevance.user_model import UserModel, model_from_bytes

POOL_SIZES = (50, 100, 200, 300, 400, 500)
# The learning phase's pace: the learning family's (benchmarks.learning_family), slates
# a second, so that the shipped reward wait (30 s) closes joins as in a shop's traffic.
PACE = 60.0
ORIGIN_TIMEOUT_S = 5.0
# The pool fills asked here serve nobody: the origin is told a caller logs their decisions
# (none does), so no decision is logged for them.
NOT_SERVED = "edge-ranking-quality"
# The segment a pool is asked for: the origin builds a segment's pool from the request's
# context alone (the segment names the edge's key, not the ranking).
POOL_SEGMENT = Segment.ACTIVE.value
RANKED_HERE = re.compile(r"^perso_edge_ranked_here_total\{[^}]*\} (\S+)$", re.MULTILINE)
ORIGIN_FAILED = (OriginRejected, OriginUnavailable, MalformedMessage)


@dataclass(frozen=True, slots=True)
class EdgeSlate:
    items: list[str]
    tier: str  # the answer's metadata.tier
    ranked_here: bool  # the edge's ranked_here counter moved while it answered


class EdgePath:
    """Slates asked of the stack's edge, one at a time, each told whether the edge ranked
    it itself (only ``edge.serve.pool_answer`` moves ``ranked_here``)."""

    def __init__(self, policy: PersoPolicy) -> None:
        self._policy = policy
        self._ranked = 0.0

    async def start(self) -> None:
        self._ranked = await self._count()

    async def _count(self) -> float:
        found = RANKED_HERE.search(await self._policy.edge_metrics())
        if found is None:
            raise RuntimeError("the edge's /metrics has no perso_edge_ranked_here_total")
        return float(found.group(1))

    async def slate(self, request: Request, exploration_rate: float | None = None) -> EdgeSlate:
        response = await self._policy.ask(request, exploration_rate=exploration_rate)
        ranked = await self._count()
        moved, self._ranked = ranked - self._ranked, ranked
        if response.status_code != 200:
            return EdgeSlate([], "", ranked_here=False)
        answer = response.json()
        items = [str(item["item_id"]) for item in answer["items"]][: request.count]
        return EdgeSlate(items, str(answer["metadata"]["tier"]), ranked_here=moved == 1)


def earned(world: ShopWorld, user: int, slate: Sequence[str]) -> float:
    """A slate's expected clicks for ``user`` under the hidden tastes."""
    return expected_clicks(world.attract[user, world.rows(list(slate))], world.examine)


def request_body(request: Request, *, exploration_rate: float | None = None) -> PersonalizeRequest:
    return PersonalizeRequest.model_validate(
        personalize_body(request, exploration_rate=exploration_rate)
    )


async def origin_slate(
    origin: OriginClient, request: Request, *, exploration_rate: float | None = None
) -> list[str]:
    """The origin's own ranking of ``request`` for its user."""
    body = request_body(request, exploration_rate=exploration_rate)
    answered = await origin.personalize(body, audience=Personal(request.user_id))
    return [item.item_id for item in answered.answer.items]


async def pool_fill(
    origin: OriginClient, request: Request, fill_items: int
) -> tuple[Pool, list[str]]:
    """The segment's pool and its answer's items (which a smaller pool keeps first)."""
    body = request_body(request)
    constraints = body.constraints.model_copy(update={"count": fill_items, "exclude_items": []})
    filled, pool = await origin.pools(
        as_fill(body, constraints), audience=Shared(POOL_SEGMENT), logged_by=NOT_SERVED
    )
    return pool, [item.item_id for item in filled.answer.items]


async def user_model(
    origin: OriginClient, user_id: str, dim: int, prior_scale: float
) -> tuple[UserModel, dict[str, float]]:
    """The user's model and stated preferences, as an edge fetches them."""
    wire = await origin.user_model(user_id)
    model = (
        model_from_bytes(wire.model, dim)
        if wire.model is not None
        else UserModel.prior(dim, prior_scale)
    )
    return model, dict(wire.preferences)


async def measure_pair(
    world: ShopWorld, edge: EdgePath, origin: OriginClient, request: Request
) -> Pair:
    got = await edge.slate(request)
    try:
        theirs: float | None = earned(world, request.user, await origin_slate(origin, request))
    except ORIGIN_FAILED:
        theirs = None
    return Pair(
        user=request.user,
        activity=request.activity,
        edge=earned(world, request.user, got.items) if got.tier else None,
        origin=theirs,
        tier=got.tier,
        ranked_here=got.ranked_here,
    )


async def measure_sizing(
    world: ShopWorld,
    edge: EdgePath,
    origin: OriginClient,
    request: Request,
    *,
    settings: Settings,
    sizes: Sequence[int],
    catalog: ItemVectorTable | None,
) -> Sizing:
    top = await origin_slate(origin, dataclasses.replace(request, count=TOP), exploration_rate=0.0)
    pool, shown = await pool_fill(origin, request, settings.edge_fill_items)
    model, preferences = await user_model(
        origin, request.user_id, pool.dim, settings.user_prior_scale
    )
    own_recall = None
    if catalog is not None:
        ranked = as_ranked(
            model,
            learnt_scale=settings.user_prior_scale,
            ranked_scale=configured_policy(settings).config.user_prior_scale,
            population=None if pool.population is None else population_from_bytes(pool.population),
        )
        own = await seen_own(
            origin, pool, catalog.nearest(ranked.mean, settings.edge_own_candidates), request
        )
        own_recall = recall(top, set(pool.item_ids) | set(own))
    recall_by: dict[int, float] = {}
    clicks_by: dict[int, float] = {}
    for size in sizes:
        held = pool_at_size(pool.item_ids, shown, size)
        recall_by[size] = recall(top, held)
        slate = means_slate(
            restricted(pool, held),
            model,
            count=request.count,
            preferences=preferences,
            value_weight=settings.value_weight,
        )
        clicks_by[size] = earned(world, request.user, slate)
    got = await edge.slate(request, exploration_rate=0.0)
    return Sizing(
        user=request.user,
        activity=request.activity,
        recall=recall_by,
        pool_clicks=clicks_by,
        origin_clicks=earned(world, request.user, top[: request.count]),
        edge_clicks=earned(world, request.user, got.items) if got.ranked_here else None,
        own_recall=own_recall,
    )


async def seen_own(
    origin: OriginClient, pool: Pool, nearest: Sequence[str], request: Request
) -> list[str]:
    """Of the user's ``nearest`` items outside ``pool``, those the edge ranks: the ones the
    origin sends as rows of the pool (the request's constraints allow them) with an
    engagement posterior over all contexts (``edge.ranking.own_candidates``)."""
    outside = [i for i in nearest if i not in set(pool.item_ids)]
    if not outside:
        return []
    constraints = request_body(request).constraints.model_copy(update={"exclude_items": []})
    rows = await origin.pool_items(
        PoolItemsRequest(cell=pool.context, constraints=constraints, item_ids=outside)
    )
    stored = rows.stored
    return [i for n, i in enumerate(rows.item_ids) if stored is None or stored[n, 3] > 0]


async def catalog_vectors(origin: OriginClient, settings: Settings) -> ItemVectorTable | None:
    """The catalog's vectors as an edge holds them (``edge.ranking.item_vectors``, read from
    the origin as an edge reads them), for the users' own candidates; None when the
    settings want none."""
    if settings.edge_own_candidates <= 0:
        return None
    table = ItemVectorTable(origin.item_vectors, settings.embedding_dim, sleep=asyncio.sleep)
    stop = asyncio.Event()
    loading = asyncio.create_task(table.run(stop))
    try:
        await asyncio.wait_for(table.settled(), 60)
    finally:
        stop.set()
        loading.cancel()
    return table


def first_request_per_user(pairs: Sequence[Pair], asked: Sequence[Request]) -> list[Request]:
    """The first request of each user whose request the edge ranked, in order."""
    seen: set[int] = set()
    firsts = []
    for pair, request in zip(pairs, asked, strict=True):
        if pair.ranked_here and request.user not in seen:
            seen.add(request.user)
            firsts.append(request)
    return firsts


async def compare(
    policy: PersoPolicy, world: ShopWorld, asked: Sequence[Request], sizes: Sequence[int]
) -> tuple[list[Pair], list[Sizing], dict[str, float]]:
    """Phases 3 and 4 against the frozen stack."""
    edge = EdgePath(policy)
    await edge.start()
    endpoints = policy.endpoints
    origin = OriginClient(
        endpoints.origin_url, timeout_s=ORIGIN_TIMEOUT_S, token=endpoints.origin_token
    )
    seconds: dict[str, float] = {}
    try:
        started_at = time.perf_counter()
        pairs = [await measure_pair(world, edge, origin, r) for r in asked]
        seconds["slates"] = time.perf_counter() - started_at
        started_at = time.perf_counter()
        sizings = []
        catalog = await catalog_vectors(origin, policy.settings)
        for request in first_request_per_user(pairs, asked):
            try:
                sizings.append(
                    await measure_sizing(
                        world,
                        edge,
                        origin,
                        request,
                        settings=policy.settings,
                        sizes=sizes,
                        catalog=catalog,
                    )
                )
            except ORIGIN_FAILED as exc:
                print(f"  pools of {request.user_id} not measured: {exc}")
        seconds["pools"] = time.perf_counter() - started_at
    finally:
        await origin.aclose()
    return pairs, sizings, seconds


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    world = make_world(WorldConfig(items=args.items, users=args.users), args.seed)
    stream = requests(world, args.learn + args.requests, args.seed)
    learning, asked = stream[: args.learn], stream[args.learn :]
    # The shipped settings unless --set says (each change printed).
    config = PersoConfig(overrides=dict(args.set))
    print(f"machine: {machine()}")
    changed = ", ".join(f"{k}={v}" for k, v in args.set) or "none"
    print(f"settings changed from the shipped defaults: {changed}")
    print(f"starting the stack ({args.items:,} items, {args.users} users, seed {args.seed})")
    policy = await started(world, config, name="perso_edge")
    try:
        print(f"learning: {args.learn:,} slates with feedback through the edge", flush=True)
        trace = await drive(world, policy, learning, args.seed, slates_per_s=args.pace)
        learnt = figures(trace, len(learning), WINDOWS)
        settled = await policy.freeze()
        print(
            f"  {trace.seconds:.0f} s, regret {learnt.final_regret_pct}% in the last tenth; "
            f"workers {'settled' if settled else 'NOT settled'} and stopped"
        )
        print(f"comparing: {len(asked):,} requests to both paths, then each user's pools")
        pairs, sizings, seconds = await compare(policy, world, asked, args.pool_sizes)
        configuration = policy.configuration()
    finally:
        await policy.aclose()
    return summary(
        pairs,
        sizings,
        world,
        args,
        learning={
            "slates": len(learning),
            "seconds": round(trace.seconds, 1),
            "final_tenth_regret_pct": learnt.final_regret_pct,
            "cum_regret_pct": learnt.cum_regret_pct,
            "errors": policy.errors,
            "workers_settled": settled,
        },
        seconds={k: round(v, 1) for k, v in seconds.items()},
        configuration=configuration,
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--learn", type=int, default=6_000, help="slates with feedback")
    parser.add_argument("--requests", type=int, default=1_500, help="requests compared")
    parser.add_argument("--users", type=int, default=300)
    parser.add_argument("--items", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--pace", type=float, default=PACE, help=f"learning slates a second ({PACE:g})"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a product setting changed from its shipped default (repeatable)",
    )
    parser.add_argument(
        "--pool-sizes", default=",".join(str(s) for s in POOL_SIZES), help="comma-separated"
    )
    parser.add_argument("--out", type=Path, default=Path(".perso/bench/edge_ranking_quality"))
    args = parser.parse_args(argv)
    args.pool_sizes = sorted({int(s) for s in args.pool_sizes.split(",") if s.strip()})
    if args.learn < WINDOWS or args.requests < 1:
        parser.error(f"--learn must be at least {WINDOWS} and --requests at least 1")
    if not args.pool_sizes or min(args.pool_sizes) < 1:
        parser.error("--pool-sizes must be positive")
    if args.pace <= 0:
        parser.error("--pace must be positive")
    try:
        args.set = [parse_setting(text) for text in args.set]
    except ValueError as exc:
        parser.error(str(exc))
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    started_at = time.perf_counter()
    # Small matrices, one request at a time: BLAS threads would only add overhead.
    threadpool_limits(limits=1, user_api="blas")
    result = asyncio.run(measure(args))
    print()
    print(tables(result))
    args.out.mkdir(parents=True, exist_ok=True)
    json_path, png_path = (
        args.out / "edge_ranking_quality.json",
        args.out / "edge_ranking_quality.png",
    )
    plot(png_path, result)
    save_and_finish(result, json_path, png_path, started_at)


if __name__ == "__main__":
    main()
