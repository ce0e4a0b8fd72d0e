"""One edge node: what it holds (``Edge``), what it counts, and ``build_edge``, the one
place that assembles a node from its settings (the answers every endpoint gives alike are
``edge.serve.answer``'s).

``edge.app``'s lifespan builds the node around a store and an origin client it makes
(an in-process or PoP-local Redis store, the network); ``benchmarks.edge_replay`` builds
the same node around a store on its virtual clock and an origin it never calls. Request
handling is ``edge.serve.personalize``, ``edge.serve.feedback`` and ``edge.serve.explain``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from config.settings import Settings, configured_policy
from decision_log.writer import DecisionLog
from edge.cache.coalesce import Coalescer
from edge.cache.decisions import served_by
from edge.cache.entry import Entry
from edge.cache.explain_cache import ExplainCache, ExplainCounters
from edge.cache.fill_lease import FillLeases
from edge.cache.freshness import Staleness
from edge.cache.popular import PopularList
from edge.cache.prewarm import Prewarmer
from edge.cache.removed_items import RemovedItems
from edge.cache.render import RenderCache
from edge.cache.store import EntryStore
from edge.exceptions import OriginRejected, OriginUnavailable
from edge.geo import default_bucket
from edge.identity import Verifier
from edge.limits.pop_rate_limit import PopRateLimiter
from edge.limits.rate_limit import Decision, RateLimiter
from edge.origins.answers import Explained
from edge.origins.client import OriginClient
from edge.origins.feedback_spool import FeedbackSpool
from edge.ranking.item_draws import ItemDraws
from edge.ranking.item_vectors import ItemVectorTable
from edge.ranking.live_posteriors import LivePosteriors
from edge.ranking.own_candidates import OwnCandidates
from edge.ranking.run_banks import RunBanks, SegmentBanks
from edge.ranking.shadow import EdgeEvaluation
from edge.ranking.user_models import HeldModel, UserModels
from edge.ranking.user_view import UserViews
from edge.sync_apply import SyncApplier
from invalidation.ttl import TtlPolicy
from protocol import keys
from protocol.histogram import LatencyHistogram
from protocol.policies import CONFIGURED, Policy, PolicyConfig
from protocol.tiers import Tier
from redis_client.client import RedisClient
from relevance.item_posteriors import PosteriorConfig
from relevance.slate import DRAWS, PRESELECT

log = logging.getLogger(__name__)

# How often at most an edge asks the origin for its live policy when pools come filled
# under another one than it holds (``Edge.check_policy_soon``).
POLICY_CHECK_S = 5.0
# Pre-warms run this long after the settle window: the fill is ranked from the updated
# embedding.
PREWARM_MARGIN_S = 0.25


@dataclass
class EdgeCounters:
    hits: int = 0
    misses: int = 0
    stale_served: int = 0
    popular_served: int = 0
    rate_limited: int = 0
    # misses over the user's fill rate (answered from what the edge has, or 429)
    fills_limited: int = 0
    revalidations: int = 0
    not_modified: int = 0
    # fills whose answer was for another audience than their key's (not stored)
    audience_refused: int = 0
    # answers the edge ranked itself from a pool (edge.serve.pool_answer), the pool fills and
    # the users' states it asked the origin for
    ranked_here: int = 0
    # of those, the ones served a run of the user's bank (edge.ranking.run_banks), drawn before
    ranked_from_bank: int = 0
    pool_fills: int = 0
    user_fetches: int = 0
    # answers the origin gave this process's fills of entries (each one origin ranking a
    # miss, a refresh or a pre-warm cost; pool fills are counted apart)
    fills: int = 0
    # how long personalize requests took here, body read to answer (edge.http.asgi)
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)


@dataclass
class Edge:
    region: str
    default_geo: str
    fill_items: int
    store: EntryStore
    views: UserViews
    origin: OriginClient
    ttl: TtlPolicy
    clock: Callable[[], float]
    verifier: Verifier
    limiter: RateLimiter
    popular: PopularList
    stale_if_error_s: float
    coalesce_wait_s: float
    coalescer: Coalescer[Entry] = field(default_factory=Coalescer)
    # With a PoP store (PERSO_EDGE_STORE=redis): the limits and the fill leases the PoP's
    # processes share there (None: this process's own buckets, per-process coalescing).
    pop_limiter: PopRateLimiter | None = None
    fill_leases: FillLeases | None = None
    counters: EdgeCounters = field(default_factory=EdgeCounters)
    staleness: Staleness = field(default_factory=Staleness)
    sync: SyncApplier | None = None  # set when the edge subscribes to its region's stream
    prewarmer: Prewarmer = field(
        default_factory=lambda: Prewarmer(clock=time.time, per_second=0, delay_s=0)
    )
    render_cache: RenderCache = field(default_factory=RenderCache)
    # /v1/explain (edge.serve.explain): segment explanations, their fills, how answers were served
    explanations: ExplainCache = field(
        default_factory=lambda: ExplainCache(ttl_s=3600.0, stale_s=3600.0)
    )
    explain_coalescer: Coalescer[Explained] = field(default_factory=Coalescer)
    explain_counters: ExplainCounters = field(default_factory=ExplainCounters)
    # Where the answers served are logged (None without REDIS_URL: not logged).
    decisions: DecisionLog | None = None
    # The context log and the shadow of the answers it ranks itself (None: not kept).
    evaluation: EdgeEvaluation | None = None
    # Items the catalog deleted lately: left out of fills and refreshes still in flight.
    removed: RemovedItems = field(default_factory=lambda: RemovedItems(clock=time.time))
    # The models of the users this edge serves, as the sync stream pushes them, and what
    # it ranks them with (edge.serve.pool_answer): off without a table.
    user_models: UserModels | None = None
    # The items' posteriors the workers stream, which the pools are ranked by
    # (edge.ranking.live_posteriors; None: pools ranked as filled).
    live_posteriors: LivePosteriors | None = None
    rank_at_edge: bool = True
    # Each user's runs of the policy over a pool, served over their next requests (None:
    # every request draws its own).
    run_banks: RunBanks | None = None
    # The segments' own runs over their pools, served to the users of whom nothing is
    # known in turn (None: every such request draws its own).
    segment_banks: SegmentBanks | None = field(default_factory=SegmentBanks)
    # The item half of the banks' draws, shared by the banks drawn over one pool
    # (edge.ranking.item_draws; None: every bank draws its own).
    item_draws: ItemDraws | None = field(default_factory=ItemDraws)
    # Each known user's own candidates, retrieved from the catalog's vectors the edge holds
    # and joined to their segment's pool (edge.ranking.own_candidates; None: the pool alone).
    own_candidates: OwnCandidates | None = None
    # Feedback the origin cannot take now, held on disk and handed on when it can
    # (edge.origins.feedback_spool; None: refused with 503).
    feedback_spool: FeedbackSpool | None = None
    pool_ttl_s: float = 60.0
    # The ranking's rules, as the origin's (``origin.policies.live.ranking_rules``): the live
    # ranking policy (its exploration rate and diversity weight are the defaults a
    # request's options replace, its prior strength is applied to the users' models),
    # switched by the sync stream (``adopt``); the graded reward's weight, the candidates
    # pre-selected, the propensities' re-sampled runs and the prior the users' models are
    # learnt under (``PERSO_USER_PRIOR_SCALE``) are the settings'.
    policy: Policy = field(default_factory=lambda: Policy(CONFIGURED, "1", PolicyConfig()))
    value_weight: float = 1.0
    preselect: int = PRESELECT
    propensity_draws: int = DRAWS
    user_prior_scale: float = 32.0
    rng: np.random.Generator = field(default_factory=np.random.default_rng)
    state_coalescer: Coalescer[HeldModel] = field(default_factory=Coalescer)
    _refreshing: set[str] = field(default_factory=set)
    _background: set[asyncio.Task[None]] = field(default_factory=set)
    _policy_checked_at: float = -math.inf

    @property
    def exploration_weight(self) -> float:
        return self.policy.config.exploration_weight

    @property
    def diversity_weight(self) -> float:
        return self.policy.config.diversity_weight

    async def check_limit(
        self, tier: Tier, endpoint: str, user_id: str, api_key_id: str
    ) -> Decision:
        """Take one request from the user's and the API key's limits for ``endpoint``: the
        PoP's shared ones when the edge has a PoP store, else this process's own."""
        if self.pop_limiter is not None:
            return await self.pop_limiter.check(tier, endpoint, user_id, api_key_id)
        return self.limiter.check(tier, endpoint, user_id, api_key_id)

    def adopt(self, policy: Policy) -> None:
        """Rank by ``policy`` from now on (a ``ModelEpoch`` announced it)."""
        self.policy = policy

    async def read_live_policy(self) -> bool:
        """Ask the origin which policy it ranks by and adopt it when its epoch is newer than
        the last one this edge heard (without a sync stream: when it is another policy);
        whether it was. At start, so that an edge that starts after a promotion ranks by
        the promoted policy from its first request; and when a pool comes filled under a
        policy this edge does not hold (``check_policy_soon``). Raises the client's
        ``OriginUnavailable`` or ``OriginRejected``."""
        epoch, policy = await self.origin.live_policy()
        if self.sync is not None:
            return self.sync.adopt_live(epoch, policy)
        if policy.label == self.policy.label:
            return False
        self.adopt(policy)
        return True

    def check_policy_soon(self) -> None:
        """A pool came filled under another policy than the one held (its epoch's message
        not heard yet, or lost): the origin's live policy is read in the background, at
        most once every ``POLICY_CHECK_S``."""
        now = self.clock()
        if now - self._policy_checked_at < POLICY_CHECK_S:
            return
        self._policy_checked_at = now

        async def check() -> None:
            try:
                await self.read_live_policy()
            except (OriginUnavailable, OriginRejected) as exc:
                log.info("the origin's live policy not read: %s", exc)

        task = asyncio.get_running_loop().create_task(check())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @property
    def served_by(self) -> str:
        """How the decision log names this edge."""
        return served_by(self.region)

    def forget_item(self, item_id: str) -> None:
        """The catalog deleted ``item_id`` (its entries are purged by the sync applier):
        out of the popular list and the cached explanations, and kept out of what fills
        still in flight bring back."""
        self.removed.add(item_id)
        self.popular.drop(item_id)
        self.explanations.drop_item(item_id)
        if self.own_candidates is not None:
            self.own_candidates.vectors.drop([item_id])

    def item_changed(self, item_id: str) -> None:
        """The item's stock or price changed, or it was deleted: the rows held of it as a
        user's own candidate are not ranked until sent again."""
        if self.own_candidates is not None:
            self.own_candidates.item_changed(item_id)

    def catalog_changed(self, version: int, item_ids: tuple[str, ...] | None) -> None:
        """The catalog (at ``version``) ingested, changed or deleted ``item_ids`` (None: any
        of its items): the item vectors fetch them, the rows held of them as users' own
        candidates are not ranked until sent again."""
        own = self.own_candidates
        if own is None:
            return
        own.vectors.changed(version, item_ids)
        if item_ids is None:
            own.clear()
        else:
            for item_id in item_ids:
                own.item_changed(item_id)

    def catalog_lost(self) -> None:
        """Sync messages were lost, catalog changes perhaps among them: the item vectors
        are read again, the own candidates' rows asked for again."""
        if self.own_candidates is not None:
            self.own_candidates.vectors.reload()
            self.own_candidates.clear()

    async def aclose(self) -> None:
        await self.prewarmer.aclose()
        if self.feedback_spool is not None:
            self.feedback_spool.close()
        if self.own_candidates is not None:
            await self.own_candidates.aclose()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)


def ttl_policy(settings: Settings) -> TtlPolicy:
    """The segment cache key's TTLs as configured (``PERSO_EDGE_TTL_*``, the session and settle
    windows)."""
    return TtlPolicy(
        power_s=settings.edge_ttl_power_s,
        active_s=settings.edge_ttl_active_s,
        casual_s=settings.edge_ttl_casual_s,
        session_cap_s=settings.edge_ttl_session_cap_s,
        session_idle_s=settings.session_idle_s,
        settle_s=settings.edge_settle_s,
    )


def applier_of(edge: Edge) -> SyncApplier:
    """What applies the region's sync stream to ``edge``: its store and soft purges, the
    items the catalog deletes, the users' states of the users it serves."""
    return SyncApplier(
        edge.store,
        edge.staleness,
        clock=edge.clock,
        forget_item=edge.forget_item,
        item_changed=edge.item_changed,
        catalog_changed=edge.catalog_changed,
        catalog_lost=edge.catalog_lost,
        users=edge.user_models,
        items=edge.live_posteriors,
        serves=edge.views.__contains__,
        adopt_policy=edge.adopt,
    )


def build_edge(
    settings: Settings,
    *,
    region: str,
    store: EntryStore,
    origin: OriginClient,
    clock: Callable[[], float],
    pop: RedisClient | None = None,
) -> Edge:
    """The node of ``region`` as ``settings`` configure it, keeping its entries in
    ``store`` and asking ``origin``: token verifier, rate limits, the users it knows, the
    popular list, the cache of segment explanations and the pre-warmer. ``pop``: the
    PoP store's client (``PERSO_EDGE_STORE=redis``), where the PoP's processes then also
    share their rate limits and take fill leases."""
    removed = RemovedItems(clock=clock)
    limiter = RateLimiter(clock=clock)
    coalesce_wait_s = settings.edge_coalesce_wait_ms / 1000
    pop_limiter = fill_leases = None
    if pop is not None:
        pop_limiter = PopRateLimiter(pop, region, fallback=limiter, clock=clock)
        fill_leases = FillLeases(
            pop, keys.edge_entry_prefix(region), wait_s=coalesce_wait_s, clock=clock
        )
    return Edge(
        region=region,
        default_geo=default_bucket(region),
        fill_items=settings.edge_fill_items,
        store=store,
        views=UserViews(max_users=settings.edge_user_views_max, clock=clock),
        origin=origin,
        ttl=ttl_policy(settings),
        clock=clock,
        verifier=Verifier(settings.identity_key_list, clock=clock),
        limiter=limiter,
        pop_limiter=pop_limiter,
        fill_leases=fill_leases,
        popular=PopularList(origin, clock=clock, logged_by=served_by(region), removed=removed),
        stale_if_error_s=settings.edge_stale_if_error_s,
        coalesce_wait_s=coalesce_wait_s,
        explanations=ExplainCache(
            ttl_s=settings.llm_cache_ttl_s, stale_s=settings.edge_stale_if_error_s
        ),
        prewarmer=Prewarmer(
            clock=clock,
            per_second=settings.edge_prewarm_per_s,
            delay_s=settings.edge_settle_s + PREWARM_MARGIN_S,
            max_users=settings.edge_user_views_max,
        ),
        removed=removed,
        user_models=UserModels(settings.edge_user_models_mb * 1024 * 1024, settings.embedding_dim),
        live_posteriors=LivePosteriors(
            PosteriorConfig(decay_half_life_s=settings.bandit_decay_half_life_s), clock=clock
        ),
        rank_at_edge=settings.edge_ranking,
        own_candidates=own_candidates_of(settings, origin),
        feedback_spool=feedback_spool_of(settings, region, origin),
        run_banks=(
            RunBanks(settings.edge_run_banks_mb * 1024 * 1024)
            if settings.edge_run_banks_mb > 0
            else None
        ),
        pool_ttl_s=settings.edge_pool_ttl_s,
        policy=configured_policy(settings),
        value_weight=settings.value_weight,
        propensity_draws=settings.propensity_draws,
        user_prior_scale=settings.user_prior_scale,
    )


def feedback_spool_of(
    settings: Settings, region: str, origin: OriginClient
) -> FeedbackSpool | None:
    """Where feedback the origin cannot take now is held (``PERSO_EDGE_FEEDBACK_SPOOL_DIR``,
    else the data directory's ``edge-feedback/<region>``); None with
    ``PERSO_EDGE_FEEDBACK_SPOOL_MAX=0``."""
    if settings.edge_feedback_spool_max <= 0:
        return None
    directory = settings.edge_feedback_spool_dir or settings.data_dir / "edge-feedback" / region
    return FeedbackSpool(directory, origin.feedback, max_held=settings.edge_feedback_spool_max)


def own_candidates_of(settings: Settings, origin: OriginClient) -> OwnCandidates | None:
    """The users' own candidates (``PERSO_EDGE_OWN_CANDIDATES`` of them; 0: none), from item
    vectors read from ``origin``; loaded by ``ItemVectorTable.run`` once the edge runs."""
    if settings.edge_own_candidates <= 0 or not settings.edge_ranking:
        return None
    vectors = ItemVectorTable(origin.item_vectors, settings.embedding_dim, sleep=asyncio.sleep)
    return OwnCandidates(
        vectors,
        origin.pool_items,
        clock=time.monotonic,
        gather_s=settings.edge_own_candidates_gather_s,
        k=settings.edge_own_candidates,
    )
