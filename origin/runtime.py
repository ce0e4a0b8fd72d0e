"""The running origin: what one process holds (settings, clients, the catalog index and
where it comes from, the feedback log, the decision log, the learned posteriors, the live
ranking policy and its rules, its RNG and clock)."""

from __future__ import annotations

import asyncio
import logging
import math
import random
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from redis.exceptions import RedisError

from config.settings import Settings, configured_policy
from coordination.instrumented import InstrumentedLock
from decision_log.writer import DecisionLog
from evaluation.shadow import ShadowRunner
from invalidation.rules import Event, messages_for
from origin.api_keys import ApiKey
from origin.catalog.deployment import Deployment, ModelDeployments
from origin.catalog.item_index import ItemIndex
from origin.catalog.replica import CatalogOrigin
from origin.catalog.replication import NO_CATALOG, CatalogMark, CatalogRole
from origin.catalog.vector_store import VectorStore
from origin.event_streams.event_log import FeedbackLog
from origin.learned.population import PopulationStore
from origin.learned.posteriors import PosteriorStore
from origin.llm.tier import LlmTier
from origin.policies.live import LivePolicy
from origin.policies.registry import PolicyRegistry
from origin.ranking.pipeline import RankingRules
from origin.service_identities import ServiceIdentities
from protocol.exceptions import MalformedMessage
from protocol.policies import Policy, decode_policy
from redis_client.client import RedisClient
from relevance.population import Population
from sync.exceptions import PublishFailed
from sync.messages import CatalogChange, ItemsChanged
from sync.publisher import SyncPublisher

log = logging.getLogger(__name__)

LEARNED_TTL_S = 1.0
# How long a request waits for the learned rank before it retrieves without a fresh one.
LEARNED_READ_TIMEOUT_S = 0.1


@dataclass
class Origin:
    settings: Settings
    redis: RedisClient
    # The vector store, opened by this process; None on a catalog replica, which loads its
    # index from ``catalog_origin`` instead (``origin.catalog.replication``).
    store: VectorStore | None
    index: ItemIndex
    feedback: FeedbackLog
    decisions: DecisionLog
    posteriors: PosteriorStore
    # The ranking policy this process ranks by, and its rules (``switch``); a request reads
    # it once, so that one answer is ranked, labelled and logged by one policy.
    live: LivePolicy
    policies: PolicyRegistry
    rng: np.random.Generator
    clock: Callable[[], float]
    publisher: SyncPublisher
    lock: InstrumentedLock  # every coordination of the origin: deployments, rebuilds, users
    deployments: ModelDeployments
    llm: LlmTier  # explanations: the model when configured and wanted, else templates
    api_keys: tuple[ApiKey, ...] = ()
    # The context log (``protocol.contexts``), beside the decision log; None: not kept.
    contexts: DecisionLog | None = None
    # Shadow mode (``origin.offline.shadow``); None: no shadow policy configured.
    shadow: ShadowRunner | None = None
    shadow_log: DecisionLog | None = None  # where the shadow's records go (``shadow:{p}``)
    # Where the catalog comes from (owner, shared or replica), which catalog ``index`` is
    # (its mark), and a replica's catalog origin.
    role: CatalogRole = CatalogRole.OWNER
    catalog_mark: CatalogMark = NO_CATALOG
    catalog_origin: CatalogOrigin | None = None
    # This process among the origins: its catalog changes name it, so it skips its own.
    instance: str = field(default_factory=lambda: uuid.uuid4().hex)
    # Draws in [0, 1) for what is not the ranking (its RNG: they must not change the slates a
    # seeded origin ranks): which decisions' contexts are logged, the jitter of retries.
    sample: Callable[[], float] = field(default=random.random, repr=False)
    # How a retry loop of a request waits (the feedback's durable append).
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, repr=False)
    inflight: int = 0
    # Who may call the service routes, and who is revoked (``origin.service_identities``).
    services: ServiceIdentities = field(default_factory=lambda: ServiceIdentities(()))
    # Catalog writes of this process take turns: ingests, deletes and a rebuild's index
    # swap, each from its store write to its swap, so that no swap brings back an item
    # another write just deleted (or drops one it just added).
    catalog_writes: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    # The learned rank's ids, when they were read, and their rows in the index that last
    # asked (``learned_top``).
    # The users' population prior, as the workers estimate it (``population``).
    population_store: PopulationStore | None = None
    _learned: tuple[float, list[str]] = field(default=(-math.inf, []), repr=False)
    _learned_rows: tuple[ItemIndex | None, list[int]] = field(default=(None, []), repr=False)

    @property
    def ranking(self) -> RankingRules:
        return self.live.rules

    @property
    def policy(self) -> str:
        return self.live.policy.name

    @property
    def policy_version(self) -> str:
        return self.live.policy.version

    @property
    def model_version(self) -> str:
        """The model version of the live deployment, which every answer carries."""
        return self.live.model_version

    def switch(self, deployment: Deployment) -> bool:
        """Rank by ``deployment``'s policy (None: the configured one) and carry its model
        version if it is newer than the live one's epoch; whether it was."""
        return self.adopt(deployment.epoch, deployment.policy, deployment.model_version)

    def adopt(self, epoch: int, policy: Policy | None, model_version: str) -> bool:
        """Rank by ``policy`` (None: the configured one), answers labelled ``model_version``,
        if ``epoch`` is newer than the live one's; whether it was."""
        if epoch <= self.live.epoch:
            return False
        chosen = policy or configured_policy(self.settings)
        before = self.live
        self.live = LivePolicy.of(self.settings, chosen, epoch, model_version)
        if chosen.label != before.label or model_version != before.model_version:
            log.info(
                "ranking policy %s, model %s (were %s, %s), epoch %d",
                chosen.label,
                model_version,
                before.label,
                before.model_version,
                epoch,
            )
        return True

    def adopt_announced(self, epoch: int, policy: bytes | None, model_version: str) -> bool:
        """``adopt`` an epoch as the origins' stream announced it (``ModelEpoch``: its
        policy encoded); MalformedMessage for a policy that does not decode."""
        return self.adopt(
            epoch, decode_policy(policy) if policy is not None else None, model_version
        )

    async def read_policy(self) -> Policy:
        """Switch to the deployment pointer's policy if it is newer; a failed or unreadable
        read keeps the live one (logged). The live policy."""
        try:
            deployment = await self.deployments.current()
        except (RedisError, MalformedMessage, ValueError, KeyError) as exc:
            log.warning("deployment pointer not read, ranking policy kept: %r", exc)
        else:
            if deployment is not None:
                self.switch(deployment)
        return self.live.policy

    async def follow_policy(self, stop: asyncio.Event) -> None:
        """Read the deployment pointer every ``PERSO_POLICY_POLL_S`` until ``stop``: the
        safety net of the origins' stream (``origin.control``), for a promotion whose
        announcement failed after the pointer was written."""
        every_s = self.settings.policy_poll_s
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), every_s)
            except TimeoutError:
                await self.read_policy()

    async def learned_top(self, index: ItemIndex, count: int) -> list[int]:
        """Rows of ``index`` (the request's) of the items with the best engagement over
        all contexts, best first; read at most once every ``LEARNED_TTL_S`` (a failed or
        slow read keeps the last). Rows are only meaningful in one index: kept with it."""
        read_at, ids = self._learned
        now = self.clock()
        if now - read_at >= LEARNED_TTL_S:
            try:
                ids = await asyncio.wait_for(self.posteriors.top(count), LEARNED_READ_TIMEOUT_S)
            except (RedisError, TimeoutError) as exc:
                log.warning("learned rank not read: %r", exc)
            self._learned = (now, ids)
            self._learned_rows = (None, [])
        rows_of, rows = self._learned_rows
        if rows_of is not index:
            row_of = index.row_of
            rows = [row for row in (row_of.get(i) for i in ids) if row is not None]
            self._learned_rows = (index, rows)
        return rows

    async def replace_index(self, index: ItemIndex, mark: CatalogMark | None = None) -> None:
        """Swap in a new catalog index (``mark``: which catalog it is, when that moved);
        requests already running keep the old one (each reads ``self.index`` once)."""
        self.index = index
        if mark is not None:
            self.catalog_mark = mark

    async def announce_catalog(self, item_ids: Sequence[str] | None) -> bool:
        """Tell the other origins the catalog changed (``item_ids``; None: everything), at
        the mark this origin holds now, and the edges, whose item vectors fetch the change
        (``sync.messages.ItemsChanged``); called after this origin swapped its index, so
        that an origin reloading from it finds the change. A failed publish is tried once
        more, then logged (False), never raised."""
        mark = self.catalog_mark
        ids = tuple(item_ids) if item_ids is not None else None
        origins = CatalogChange(self.instance, mark.version, mark.slot, ids)
        told_origins = await self._told(
            "origins", lambda: self.publisher.publish_to_origins([origins])
        )
        told_edges = await self._told(
            "edges", lambda: self.publisher.publish([ItemsChanged(mark.version, ids)])
        )
        return told_origins and told_edges

    async def _told(self, whom: str, publish: Callable[[], Awaitable[list[int]]]) -> bool:
        for attempt in (1, 2):
            try:
                await publish()
            except PublishFailed as exc:
                log.warning("catalog change not announced to the %s (%d): %s", whom, attempt, exc)
            else:
                return True
        return False

    def keeps_context(self) -> bool:
        """Whether this decision's context goes to the context log
        (``PERSO_CONTEXT_LOG_RATE``)."""
        rate = self.settings.context_log_rate
        return self.contexts is not None and rate > 0 and self.sample() < rate

    def prior_var(
        self, index: ItemIndex, live: LivePolicy, population: Population | None = None
    ) -> float:
        """The prior variance of the users' models as ``live`` ranks them (under
        ``population``, with its prior strength: ``LivePolicy.user_model``)."""
        return live.prior_var(index.dim, population)

    async def population(self) -> Population | None:
        """The users' population prior (``origin.learned.population``), read at most every
        two seconds; None before the workers estimated one."""
        if self.population_store is None:
            return None
        return await self.population_store.current()

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    async def announce(self, events: Iterable[Event]) -> bool:
        """Layer 2: publish to every region what ``events`` invalidate
        (``invalidation.rules``), each message once. Called after the write the events
        describe is durable: a failed publish is logged and left to the TTLs (False), never
        raised; a caller that must tell its client (a delete) looks at the answer."""
        messages = list(dict.fromkeys(m for event in events for m in messages_for(event)))
        if not messages:
            return True
        try:
            await self.publisher.publish(messages)
        except PublishFailed as exc:
            log.warning("%d invalidations not published: %s", len(messages), exc)
            return False
        return True
