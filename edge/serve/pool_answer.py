"""Answers an edge ranks itself: a known user's request ranked from their segment's
candidate pool and their own model, and a request of a user of whom nothing is known
ranked from the pool by the segment's own ranking, with no origin call on the request's
path once the edge holds the pool (and the known user's model).

- The pool lives in a shared entry, under the key the segment's users share whatever
  their page, geo or time bucket (``edge.cache.key.pool_cache_key``), filled by the
  origin's pool fill (``OriginClient.pools``), coalesced, refreshed in the background
  ahead of expiry, tagged with every item it holds and its segment, so purges, stock
  changes, removals and model epochs reach it as they reach any entry. It holds nobody's
  data (``edge.serve.pool_fill``). Its items' posteriors are brought up to date between
  fills by the workers' stream (``edge.ranking.live_posteriors``).
- A known user's model (and stated preferences) is the edge's user table's
  (``edge.ranking.user_models``), kept fresh by the sync stream; a user the edge holds nothing
  complete of costs one small origin call (``OriginClient.user_model``), once
  (``edge.serve.user_model``).
- The ranking is ``edge.ranking.pool_ranking``'s, the origin's code; a known user's next requests
  over the same pool are served the other runs it drew (``edge.ranking.run_banks``), and the
  segment's users of whom nothing is known are served its own runs in turn
  (``SegmentBanks``): consecutive new users see different draws of the policy, each
  exploring, rather than one cached slate for the TTL of a shared entry.

When any of that cannot be had (the origin down, a request for explanations, a request
too large to share a fill), ``answer_here`` says so (None) and the request takes the
origin's path as before (for a new user: the segment's cached answer). An answer ranked
here is never stored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace

from edge.cache.entry import CachedItem, Entry
from edge.cache.prepared_pool import PreparedPool
from edge.cache.render import new_request_id
from edge.node import Edge
from edge.ranking.pool_ranking import Drawn, Policy, PoolRanking, pool_runs, ranking_of
from edge.ranking.run_banks import BankKey
from edge.ranking.user_models import HeldModel
from edge.serve.fill import Keyed, shareable_request
from edge.serve.pool_fill import pool_entry, pool_key
from edge.serve.user_model import user_model
from protocol.api import PersonalizeRequest
from protocol.audience import Audience, Personal
from protocol.policies import Policy as RankingPolicy
from relevance.population import Population, as_ranked
from relevance.slate import diversity_for, spread_for
from relevance.user_model import UserModel


@dataclass(frozen=True, slots=True)
class RankedHere:
    """An answer ranked at the edge: the entry to render (for its user alone), its items,
    and whether it cost the origin a call on the request's path: a hit when the pool and
    the user's model were at hand, a miss when either was asked for (``pool_filled``,
    ``state_fetched``)."""

    entry: Entry
    items: list[CachedItem]
    pool_filled: bool
    state_fetched: bool

    @property
    def hit(self) -> bool:
        return not (self.pool_filled or self.state_fetched)


async def answer_here(
    edge: Edge,
    body: PersonalizeRequest,
    keyed: Keyed,
    now: float,
    *,
    may_fill: Callable[[], Awaitable[bool]],
) -> RankedHere | None:
    """The request ranked at the edge, or None when it takes the origin's path;
    ``may_fill`` says whether the user may cost the origin a pool fill or a state fetch
    now (the fill rate limit)."""
    policy = edge.policy  # one policy for the whole answer, whatever is adopted meanwhile
    if edge.user_models is None or not edge.rank_at_edge or policy.config.kind != "ranker":
        return None  # the references are the origin's to rank
    if body.options.include_explanation or not shareable_request(body):
        return None
    audience = keyed.key.audience
    state: HeldModel | None = None
    state_fetched = False
    if isinstance(audience, Personal):
        state, state_fetched = await user_model(edge, body.user_id, may_fill)
        if state is None:
            return None
    pooled = pool_key(edge, keyed)
    found = await pool_entry(edge, body, pooled, now, may_fill=may_fill)
    if found is None:
        return None
    entry, pool_filled = found
    pool = entry.prepared_pool
    # A pool the origin filled under another ranking policy than the one held here (a
    # promotion this edge has not read yet, or one before it started): the origin ranks.
    if pool is None or entry.degraded or not held_policy(edge, entry, policy):
        return None
    if edge.live_posteriors is not None:
        # Its items' posteriors as the workers have them now, not as at the fill.
        pool = edge.live_posteriors.refreshed(pool, now * 1000)
    draws = drawn_by(edge, body, policy)
    exclude = frozenset(body.constraints.exclude_items)
    bank_key = bank_key_of(
        edge, body, pooled, entry, pool=pool, draws=draws, policy=policy, state=state, now=now
    )
    ranked_from: Callable[[], PreparedPool] = lambda: pool  # noqa: E731
    if state is None:
        ranking = segment_ranked(
            edge, bank_key, pool=pool, policy=draws, exclude=exclude, live=policy
        )
    else:
        ranking, ranked_from = ranked(
            edge, body, state, key=bank_key, pool=pool, policy=draws, live=policy, now=now
        )
    edge.counters.ranked_here += 1
    if not (pool_filled or state_fetched):
        edge.counters.hits += 1
    else:
        edge.counters.misses += 1
    answer = ranked_entry(entry, ranking, audience, pool, policy)
    if state is not None:
        beside(
            edge,
            body,
            answer,
            pool=ranked_from,
            population=pool.population,
            state=state,
            draws=draws,
            live=policy,
            now=now,
        )
    return RankedHere(answer, list(ranking.items), pool_filled, state_fetched)


def bank_key_of(
    edge: Edge,
    body: PersonalizeRequest,
    pooled: Keyed,
    entry: Entry,
    *,
    pool: PreparedPool,
    draws: Policy,
    policy: RankingPolicy,
    state: HeldModel | None,
    now: float,
) -> BankKey:
    """What the runs served for ``body`` are drawn for besides the user's model
    (``edge.ranking.run_banks.BankKey``): the pool's entry under ``pooled``, the pool's build
    and terms, the request's ``draws``, the live ranking ``policy`` and the own candidates'
    rows the draw would join."""
    return BankKey(
        pooled.key.digest,
        entry.generation,
        pool.pool.built_ms,
        draws,
        policy.label,
        pool.terms_version,
        own_version(edge, body, pool, state, now),
    )


def ranked_entry(
    entry: Entry,
    ranking: PoolRanking,
    audience: Audience,
    pool: PreparedPool,
    policy: RankingPolicy,
) -> Entry:
    """The answer ``ranking`` makes of the pool's ``entry``, for ``audience`` alone (never
    stored): its items, scores and propensities, the pool's context, ``policy``'s label."""
    return replace(
        entry,
        items=ranking.items,
        audience=audience,
        complete=True,
        exploration_applied=ranking.exploration_applied,
        tags=(),
        scores=ranking.scores,
        propensities=ranking.propensities,
        context=pool.pool.context,
        policy=policy.label,
        pool=None,
        # This ranking's own id: its decisions join the context logged under it, not the
        # pool fill's (``edge.ranking.shadow``).
        ranking_id=new_request_id(),
    )


def held_policy(edge: Edge, entry: Entry, policy: RankingPolicy) -> bool:
    """Whether the pool of ``entry`` was filled under the ranking policy the edge holds (or
    an origin that names none); if not, a promotion this edge has not heard of, and the
    origin's live policy is read (``Edge.check_policy_soon``)."""
    if entry.policy in ("", policy.label):
        return True
    edge.check_policy_soon()
    return False


def beside(
    edge: Edge,
    body: PersonalizeRequest,
    answer: Entry,
    *,
    pool: Callable[[], PreparedPool],
    population: Population | None,
    state: HeldModel,
    draws: Policy,
    live: RankingPolicy,
    now: float,
) -> None:
    """The context of ``answer``, a ranking made here over ``pool()`` (the users of which
    are ranked under ``population``), and the shadow's run on it, when sampled
    (``edge.ranking.shadow``); not for a request ranked by its own options, which a replay
    of the live policy would not reproduce."""
    own_options = body.options.exploration_rate is not None or (
        body.options.diversity_weight is not None
    )
    if edge.evaluation is None or own_options:
        return
    edge.evaluation.beside(
        ranking_id=answer.ranking_id,
        user_id=body.user_id,
        at_ms=int(now * 1000),
        pool=pool,
        model=lambda: prior_applied(edge, state.model, live, population),
        draws=draws,
        exclude=frozenset(body.constraints.exclude_items),
        preferences=state.preferences or {},
        shown=[item.item_id for item in answer.items],
        live=live,
        prior_var=lambda: prior_var_of(edge, live, state.model.dim, population),
    )


def drawn_by(edge: Edge, body: PersonalizeRequest, policy: RankingPolicy) -> Policy:
    """How a request's slate is drawn: the ranking policy's exploration rate and diversity
    weight unless the request gives its own, the edge's other rules."""
    rate, weight = body.options.exploration_rate, body.options.diversity_weight
    knobs = policy.config
    return Policy(
        count=body.constraints.count,
        spread=spread_for(rate if rate is not None else knobs.exploration_weight),
        value_weight=edge.value_weight,
        diversity=diversity_for(weight if weight is not None else knobs.diversity_weight),
        preselect=edge.preselect,
        draws=edge.propensity_draws,
    )


def segment_ranked(
    edge: Edge,
    key: BankKey,
    *,
    pool: PreparedPool,
    policy: Policy,
    exclude: frozenset[str],
    live: RankingPolicy,
) -> PoolRanking:
    """The segment's own slate over ``pool`` for a user of whom nothing is known: the next
    run of the segment's bank for ``key`` (``edge.ranking.run_banks.SegmentBanks``), else
    drawn now and banked unless the request excludes items. Each run draws the user from
    the users' population prior the pool carries (``newcomer``)."""
    banks = edge.segment_banks
    if banks is None or exclude:
        model = newcomer(edge, live, pool)
        alone = pool_runs(pool, model, policy, exclude=exclude, preferences={}, rng=edge.rng)
        return ranking_of(pool, alone, 0)
    banked = banks.next_run(key)
    if banked is not None:
        return ranking_of(pool, *banked)
    every = bank_of(edge, pool, newcomer(edge, live, pool), policy, preferences={})
    banks.put(key, every)
    return ranking_of(pool, every, 0)


def ranked(
    edge: Edge,
    body: PersonalizeRequest,
    state: HeldModel,
    *,
    key: BankKey,
    pool: PreparedPool,
    policy: Policy,
    live: RankingPolicy,
    now: float,
) -> tuple[PoolRanking, Callable[[], PreparedPool]]:
    """The user's slate over ``pool`` as ranked now (its pool entry, terms and policy:
    ``key``), and the pool it was ranked from (built when asked for: a sampled context log):
    the next run of their bank
    (``edge.ranking.run_banks``) when they hold one drawn from this state for ``key``; else
    drawn now over the pool joined with the user's own candidates
    (``edge.ranking.own_candidates``), and banked unless the request excludes items.
    ``live``: the ranking policy, whose prior strength the user's model is put under
    (``relevance.user_model.with_prior``)."""
    banks = edge.run_banks
    user_id = body.user_id
    exclude = frozenset(body.constraints.exclude_items)
    preferences = state.preferences or {}
    if banks is not None and not exclude:
        banked = banks.next_run(user_id, state, key)
        if banked is not None:
            edge.counters.ranked_from_bank += 1
            drawn, run = banked
            return ranking_of(pool, drawn, run), lambda: ranked_over(pool, drawn)
    model = prior_applied(edge, state.model, live, pool.population)  # only what draws runs needs it
    pool = with_own(edge, pool, model=model, body=body, now=now)
    if banks is None or exclude:
        alone = pool_runs(
            pool, model, policy, exclude=exclude, preferences=preferences, rng=edge.rng
        )
        return ranking_of(pool, alone, 0), lambda: pool
    every = bank_of(edge, pool, model, policy, preferences=preferences)
    banks.put(user_id, state, key, every)
    return ranking_of(pool, every, 0), lambda: pool


def ranked_over(pool: PreparedPool, drawn: Drawn) -> PreparedPool:
    """The pool ``drawn``'s runs were drawn over: ``pool``, or it joined with the user's
    own candidates."""
    parts = drawn.parts
    return pool if parts is None else parts.base.joined(parts.other, parts.rows)


def with_own(
    edge: Edge,
    pool: PreparedPool,
    *,
    model: UserModel,
    body: PersonalizeRequest,
    now: float,
) -> PreparedPool:
    """``pool`` joined with the user's own candidates held for it (the items nearest their
    model: ``edge.ranking.own_candidates``); itself without them."""
    own = edge.own_candidates
    if own is None:
        return pool
    return own.joined(pool, model.mean, body.constraints, ranked_beside(edge, now))


def own_version(
    edge: Edge, body: PersonalizeRequest, pool: PreparedPool, state: HeldModel | None, now: float
) -> tuple[int, int]:
    """The version of the own candidates' rows a known user's draw over ``pool`` for
    ``body`` would join (``OwnCandidates.version``)."""
    own = edge.own_candidates
    if own is None or state is None:
        return (0, 0)
    return own.version(pool, body.constraints, ranked_beside(edge, now))


def ranked_beside(edge: Edge, now: float) -> Callable[[PreparedPool, PreparedPool], PreparedPool]:
    """Rows as ranked beside a pool: brought up to date with the workers' stream, with the
    cold priors of the pool and them together (``LivePosteriors.beside``)."""
    live = edge.live_posteriors
    if live is None:
        return lambda rows, _: rows
    return lambda rows, base: live.beside(rows, base, now * 1000)


def bank_of(
    edge: Edge,
    pool: PreparedPool,
    model: UserModel | None,
    policy: Policy,
    *,
    preferences: Mapping[str, float],
) -> Drawn:
    """A bank's runs over ``pool`` for ``model`` (None: the segment's own ranking), its
    item draws shared with the other banks over the pool (``edge.ranking.item_draws``)."""
    every = pool_runs(
        pool,
        model,
        policy,
        exclude=(),
        preferences=preferences,
        rng=edge.rng,
        item_draws=edge.item_draws,
    )
    return Drawn.of(every, pool)


def newcomer(edge: Edge, live: RankingPolicy, pool: PreparedPool) -> UserModel | None:
    """A user of whom nothing is known: nobody's evidence under the users' population prior
    that ``pool`` carries (its mean: what users are like); None without one, or one of
    another dimension (the items' own terms alone)."""
    population = pool.population
    if population is None or population.dim != pool.pool.vectors.shape[1]:
        return None
    empty = UserModel.prior(population.dim, edge.user_prior_scale)
    return prior_applied(edge, empty, live, population)


def prior_applied(
    edge: Edge, model: UserModel, live: RankingPolicy, population: Population | None
) -> UserModel:
    """The user's model (learnt under ``PERSO_USER_PRIOR_SCALE``) as the origin would rank
    it (``relevance.population.as_ranked``): under the users' ``population`` prior (the
    pool's), its spread scaled by the ranking policy's prior strength; without one, under
    the policy's prior strength alone."""
    return as_ranked(
        model,
        learnt_scale=edge.user_prior_scale,
        ranked_scale=live.config.user_prior_scale,
        population=population,
    )


def prior_var_of(edge: Edge, live: RankingPolicy, dim: int, population: Population | None) -> float:
    """The prior variance of a model as ``prior_applied`` puts it (for the context log)."""
    ratio = live.config.user_prior_scale / edge.user_prior_scale
    if population is not None and population.dim == dim:
        return float(population.marginal().mean()) * ratio
    return live.config.user_prior_scale / dim
