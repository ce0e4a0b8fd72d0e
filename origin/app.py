"""The origin's composition root: ``create_app`` builds what a running origin holds
(``origin.runtime.Origin``) in its lifespan and assembles the routers of ``origin.http``
behind its two outermost middlewares (credentials first, then the body's size).

The catalog comes from the vector store this process opens, or, on a catalog replica
(``PERSO_CATALOG_ORIGIN_URL``), from the catalog origin (``origin.catalog.replica``), as
``origin.catalog_source`` opens it; the origins' control stream (``origin.control``) keeps
it and the live policy in step with what the other origins do. The jobs beside the app
run as ``origin.background_jobs`` runs them."""

from __future__ import annotations

import functools
import gc
import logging
import random
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager

import httpx
import numpy as np
from fastapi import FastAPI
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from config.settings import ConfigError, Settings, configured_policy
from config.tls import client_verify
from coordination.registry import Registration
from decision_log.writer import DecisionLog, configured_log, shadow_writer
from evaluation.shadow import ShadowRunner
from origin.api_keys import ApiKey, parse_api_keys
from origin.background_jobs import background, cancelled_at_exit
from origin.catalog.deployment import ModelDeployments
from origin.catalog.item_index import ItemIndex
from origin.catalog.replication import CatalogMark, CatalogRole, announces_at_start
from origin.catalog_follower import CatalogFollower
from origin.catalog_source import CatalogSource, catalog_source, load_catalog
from origin.control import OriginControl, start_cursor
from origin.event_streams.event_log import FeedbackLog
from origin.event_streams.streams import ensure_groups
from origin.http import openapi
from origin.http.admin import CATALOG_ITEMS_PATH, admin_router
from origin.http.auth import Access
from origin.http.coordination import coordination_router
from origin.http.explain import explain_router
from origin.http.feedback import feedback_router
from origin.http.health import health_router
from origin.http.item_vectors import item_vectors_router
from origin.http.metrics import metrics_router
from origin.http.ops import ops_router
from origin.http.ops_scrape import OpsScraper
from origin.http.personalize import personalize_router
from origin.http.policies import policies_router
from origin.http.pools import pools_router
from origin.http.preferences import preferences_router
from origin.http.purge import purge_router
from origin.http.replicas import replicas_router
from origin.http.services import services_router
from origin.http.tokens import tokens_router
from origin.http.user_model import user_model_router
from origin.learned.population import PopulationStore
from origin.learned.posteriors import PosteriorConfig, PosteriorStore
from origin.llm import precompute as llm_precompute
from origin.llm.tier import llm_tier
from origin.locks import origin_lock
from origin.offline.shadow import report as shadow_report
from origin.policies.live import LivePolicy
from origin.policies.registry import PolicyRegistry
from origin.runtime import Origin
from origin.service_identities import ServiceIdentities, identities_of
from protocol import keys
from protocol.exceptions import MalformedMessage
from protocol.policy_specs import inline, is_inline
from protocol.scrape_networks import parse_networks
from protocol.service_tokens import parse_service_tokens
from redis_client.client import RedisClient, open_client
from redis_client.durable import Durability
from sync.cursor import Cursor
from sync.publisher import SyncPublisher
from web.body_limit import BodyLimit
from web.problems import install_error_handlers

log = logging.getLogger(__name__)


async def run_shadow(
    resources: AsyncExitStack,
    shadow: ShadowRunner,
    shadow_log: DecisionLog,
    redis: RedisClient,
    partitions: int,
) -> None:
    """The shadow's jobs beside the app: its log's flushes, its runs, its comparison."""
    await resources.enter_async_context(background(shadow_log.run))
    await resources.enter_async_context(background(shadow.run))
    comparing = functools.partial(shadow_report, shadow, redis, partitions)
    await resources.enter_async_context(background(comparing))


async def shadow_runner(
    settings: Settings, registry: PolicyRegistry, shadow_log: DecisionLog
) -> ShadowRunner | None:
    """The shadow policy's runner (``PERSO_SHADOW_POLICY``: a registered policy, ``name`` or
    ``name@version``, a reference, or one written inline; ``PERSO_SHADOW_RATE``), None when
    no shadow is configured."""
    spec = settings.shadow_policy
    if not spec:
        return None
    if is_inline(spec):
        try:
            policy = inline(spec)
        except MalformedMessage as exc:
            raise ConfigError(f"PERSO_SHADOW_POLICY: {exc}") from exc
    else:
        name, _, version = spec.partition("@")
        found = await registry.get(name, version or None)
        if found is None:
            raise ConfigError(f"PERSO_SHADOW_POLICY: no registered policy {spec!r}")
        policy = found
    return ShadowRunner(
        policy,
        shadow_writer(shadow_log),
        rate=settings.shadow_rate,
        sample=random.random,
        rng=np.random.default_rng(),
    )


def body_limit(settings: Settings, path: str) -> int:
    """Bytes a request body to ``path`` may have: catalog batches are far larger than any
    API request."""
    if path == CATALOG_ITEMS_PATH:
        return settings.origin_max_ingest_body_bytes
    return settings.origin_max_body_bytes


async def follow_policy_and_services(resources: AsyncExitStack, origin: Origin) -> None:
    """The live policy (the deployment pointer's: the configured one when nothing was
    promoted, or the pointer cannot be read now) and the revoked service identities, as
    every origin shares them: read now, then followed."""
    await origin.read_policy()
    await resources.enter_async_context(background(origin.follow_policy))
    await origin.services.refresh(origin.redis)
    follow = functools.partial(origin.services.follow, origin.redis)
    await resources.enter_async_context(background(follow))


def service_identities(settings: Settings) -> ServiceIdentities:
    """Who may call the service routes: ``PERSO_ORIGIN_TOKEN`` and ``PERSO_SERVICE_TOKENS``."""
    shared = settings.origin_token.get_secret_value() if settings.origin_token else None
    named = settings.service_tokens
    return identities_of(shared, parse_service_tokens(named.get_secret_value()) if named else ())


async def follow_the_origins(
    resources: AsyncExitStack,
    origin: Origin,
    source: CatalogSource,
    redis: RedisClient,
    cursor: Cursor,
) -> OriginControl:
    """The origins' control stream read from ``cursor`` (on ``redis``, a client of its
    own) and the catalog reloads it asks for, beside the app; the catalog origin then
    announces the catalog it holds (``announces_at_start``)."""
    follower = CatalogFollower(origin, source.fetch)
    control = OriginControl(origin, follower)
    await resources.enter_async_context(background(follower.run))
    subscriber = control.subscriber(redis, cursor, origin.clock)
    await resources.enter_async_context(cancelled_at_exit(subscriber.run))
    if announces_at_start(source.role):
        await origin.announce_catalog(None)
    return control


async def operations(
    resources: AsyncExitStack,
    settings: Settings,
    role: CatalogRole,
    redis: RedisClient,
    clock: Callable[[], float],
) -> OpsScraper:
    """The operations page's scraper (``origin.http.ops``), and this origin's heartbeat in
    the registry it reads (``coordination.registry``) when it knows its URL."""
    if settings.advertise_url:
        registration = Registration(
            redis,
            name=f"origin ({role})",
            kind="origin",
            region="",
            url=settings.advertise_url,
            clock=clock,
        )
        await resources.enter_async_context(background(registration.run))
    networks = parse_networks(settings.ops_scrape_networks)
    scraper = OpsScraper(redis, clock=clock, networks=networks, verify=client_verify(settings))
    return await resources.enter_async_context(scraper)


async def open_origin(
    resources: AsyncExitStack,
    settings: Settings,
    redis: RedisClient,
    source: CatalogSource,
    *,
    index: ItemIndex,
    mark: CatalogMark,
    clock: Callable[[], float],
    rng: np.random.Generator | None,
    api_keys: tuple[ApiKey, ...],
) -> Origin:
    """What a running origin holds, over ``redis`` and the catalog ``index`` (at ``mark``)
    loaded from ``source``: its logs, stores and publisher, the origin's lock and LLM tier
    (entered into ``resources``), the shadow runner when one is configured."""
    feedback_log = FeedbackLog(
        redis,
        partitions=settings.event_partitions,
        dedup_ttl_s=settings.feedback_dedup_ttl_s,
        clock=clock,
        durability=Durability(settings.redis_wait_replicas, settings.redis_wait_timeout_ms),
    )
    posteriors = PosteriorConfig(decay_half_life_s=settings.bandit_decay_half_life_s)
    decisions = configured_log(settings, redis, clock, keys.decisions_stream)
    contexts = configured_log(settings, redis, clock, keys.contexts_stream)
    registry = PolicyRegistry(redis, configured_policy(settings))
    shadow_log = configured_log(settings, redis, clock, keys.shadow_stream)
    shadow = await shadow_runner(settings, registry, shadow_log)
    publisher = SyncPublisher(redis, settings.regions, clock)
    lock = await resources.enter_async_context(origin_lock(settings, redis, clock))
    return Origin(
        settings=settings,
        redis=redis,
        store=source.store,
        index=index,
        feedback=feedback_log,
        decisions=decisions,
        posteriors=PosteriorStore(redis, posteriors),
        population_store=PopulationStore(redis, clock),
        live=LivePolicy.of(settings, configured_policy(settings)),
        policies=registry,
        rng=rng if rng is not None else np.random.default_rng(),
        clock=clock,
        publisher=publisher,
        lock=lock,
        deployments=ModelDeployments.over(redis, lock, publisher),
        llm=await resources.enter_async_context(llm_tier(settings, redis)),
        api_keys=api_keys,
        contexts=contexts,
        shadow=shadow,
        shadow_log=shadow_log,
        role=source.role,
        catalog_mark=mark,
        catalog_origin=source.catalog_origin,
        services=service_identities(settings),
    )


async def start_jobs(resources: AsyncExitStack, origin: Origin) -> None:
    """The origin's jobs beside the app: the LLM tier's precomputed explanations (when
    enabled and ``PERSO_LLM_PRECOMPUTE_EVERY_S`` > 0), the decision and context logs'
    flushes, the shadow's jobs, and the live policy and revoked services followed."""
    settings = origin.settings
    if origin.llm.enabled and settings.llm_precompute_every_s > 0:
        warm = functools.partial(
            llm_precompute.run,
            origin.llm,
            lambda: origin.index,
            origin.lock,
            every_s=settings.llm_precompute_every_s,
            timeout_ms=settings.llm_timeout_ms,
        )
        await resources.enter_async_context(background(warm))
    await resources.enter_async_context(background(origin.decisions.run))
    if origin.contexts is not None:
        await resources.enter_async_context(background(origin.contexts.run))
    if origin.shadow is not None and origin.shadow_log is not None:
        partitions = settings.event_partitions
        await run_shadow(resources, origin.shadow, origin.shadow_log, origin.redis, partitions)
    await follow_policy_and_services(resources, origin)


def create_app(
    settings: Settings,
    *,
    clock: Callable[[], float] = time.time,
    rng: np.random.Generator | None = None,
    catalog_transport: httpx.AsyncBaseTransport | None = None,
) -> FastAPI:
    """The origin app; ``catalog_transport`` replaces the network to the catalog origin
    (a replica's, in tests: the catalog origin's app in process)."""
    if not settings.redis_url:
        raise ConfigError("REDIS_URL is required by the origin (`perso up` starts one for you)")
    redis_url = settings.redis_url
    try:
        api_keys = parse_api_keys(settings.api_keys.get_secret_value()) if settings.api_keys else ()
    except ValueError as exc:
        raise ConfigError(f"PERSO_API_KEYS: {exc}") from exc

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Small matrix products on an event loop: BLAS worker threads only add overhead.
        threadpool_limits(limits=1, user_api="blas")
        redis = await open_client(redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)
        # Its own client: it blocks in XREAD (up to a second) above the default's timeout.
        control_redis = await open_client(redis_url, socket_timeout=5.0, socket_connect_timeout=2.0)
        source = catalog_source(settings, redis, catalog_transport)
        resources = AsyncExitStack()
        try:
            # Before the catalog and the deployment pointer are read: nothing announced
            # while they load is missed.
            cursor = await start_cursor(control_redis)
            index, mark = await load_catalog(settings, source)
            await ensure_groups(redis, settings.event_partitions)
            origin = app.state.origin = await open_origin(
                resources,
                settings,
                redis,
                source,
                index=index,
                mark=mark,
                clock=clock,
                rng=rng,
                api_keys=api_keys,
            )
            # The catalog is millions of long-lived objects: keep the cyclic collector from
            # scanning them on the request path (a full collection is a latency spike).
            gc.collect()
            gc.freeze()
            await start_jobs(resources, origin)
            app.state.control, app.state.ops = (
                await follow_the_origins(resources, origin, source, control_redis, cursor),
                await operations(resources, settings, source.role, redis, clock),
            )
            log.info(
                "origin ready (%s catalog, mark %s): %d items, dimension %d",
                source.role,
                mark,
                len(index),
                index.dim,
            )
            yield
        finally:
            await resources.aclose()
            await source.close()
            await control_redis.aclose()
            await redis.aclose()

    app = FastAPI(title="perso origin", version="0.1.0", lifespan=lifespan)
    assemble(app, settings)
    return app


ROUTERS = (
    health_router,
    personalize_router,
    pools_router,
    item_vectors_router,
    feedback_router,
    admin_router,
    tokens_router,
    purge_router,
    policies_router,
    coordination_router,
    metrics_router,
    explain_router,
    user_model_router,
    preferences_router,
    replicas_router,
    ops_router,
    services_router,
)


def assemble(app: FastAPI, settings: Settings) -> None:
    """The routers of ``origin.http`` behind the two outermost middlewares, the error
    handlers and the published description."""
    install_error_handlers(app)
    # Outermost first: who the caller is (headers only), then how much body it may send.
    app.add_middleware(BodyLimit, limit_for=lambda path: body_limit(settings, path))
    app.add_middleware(Access)
    for router in ROUTERS:
        app.include_router(router)
    openapi.install(app)
