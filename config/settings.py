"""Typed settings, read once from the environment when a process starts.

Every field is an environment variable (documented in docs/configuration.md, generated
from this module). The four that name outside services keep their conventional names
(``REDIS_URL``, ``QDRANT_URL``, ``QDRANT_API_KEY``); the rest carry the ``PERSO_`` prefix.
Code receives a ``Settings`` object; nothing reads the environment afterwards. The checks
beyond the fields' types and bounds are in ``config.validation``; the variable behind a
field, a child process's environment and reading the environment (``load_settings``), in
``config.environment``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from config.validation import (
    check_advertise_url,
    check_identity_keys,
    check_ops_scrape_networks,
    check_origin_urls,
    check_redis_url,
    check_service_tokens,
    check_together,
    split_comma_list,
)
from protocol.exceptions import PersoError
from protocol.identity import parse_keys
from protocol.policies import CONFIGURED, DEFAULT_CONFIG, Policy, PolicyConfig
from protocol.scrape_networks import DEFAULT_NETWORKS

# PERSO_CATALOG's two words; anything else names a file.
SAMPLE_CATALOG = "sample"
EMPTY_CATALOG = "empty"


class ConfigError(PersoError):
    """The environment does not describe a valid configuration; names the variables."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PERSO_", frozen=True, extra="ignore")

    # --- outside services -------------------------------------------------------------
    redis_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("REDIS_URL"),
        description="Redis to use; unset: start an embedded redis-server on a free port.",
    )
    qdrant_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("QDRANT_URL"),
        description="Qdrant server; unset: qdrant-client local mode at PERSO_QDRANT_PATH.",
    )
    qdrant_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("QDRANT_API_KEY")
    )

    llm_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("LLM_BASE_URL"),
        description="OpenAI-compatible model server (vLLM, llama.cpp server, Ollama); "
        "unset: explanations come from templates only.",
    )
    llm_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("LLM_API_KEY")
    )

    # --- where things live --------------------------------------------------------------
    data_dir: Path = Path(".perso")
    qdrant_path: Path | None = None
    host: str = "127.0.0.1"
    origin_port: int = Field(default=8100, ge=1, le=65535)
    edge_port_base: int = Field(default=8101, ge=1, le=65535)
    # The base URL other processes reach this edge or origin at (its /metrics, for the
    # origins' operations page); unset: `perso edge` / `perso origin` advertise
    # http://PERSO_HOST:<port>. A process without one (an app built in-process) does not
    # register.
    advertise_url: str | None = None
    # TLS between the parts (config/tls.py): with a certificate and its key, `perso origin`
    # and `perso edge` serve HTTPS (and advertise https://), and `perso up` names them so;
    # the CA file is what the parts' clients (edges to origins, the origins' scraper and
    # catalog replication) verify the others' certificates with (unset: the system's).
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_ca_file: Path | None = None
    # Where the origins' operations page may scrape a registered URL's /metrics
    # (comma-separated IP networks; protocol/scrape_networks.py): loopback and the private
    # ranges by default, never a link-local metadata service unless listed.
    ops_scrape_networks: Annotated[tuple[str, ...], NoDecode] = DEFAULT_NETWORKS
    origin_url: str = "http://127.0.0.1:8100"
    # Every origin an edge may call (comma-separated http(s) URLs); unset: PERSO_ORIGIN_URL
    # alone. Read it through ``edge_origin_urls``.
    origin_urls: Annotated[tuple[str, ...], NoDecode] = ()
    regions: Annotated[tuple[str, ...], NoDecode] = ("us-east", "eu-west", "ap-south")
    region: str = "us-east"

    # --- model ----------------------------------------------------------------------------
    embedding_dim: int = Field(default=128, ge=8, le=4096)
    model_version: str = "nn-slice-1"
    # What ``perso up`` starts the catalog from: ``sample`` (generated), ``empty`` (nothing:
    # items come through the admin API), or a path to a JSON-lines file of items.
    catalog: str = Field(default=SAMPLE_CATALOG, min_length=1)
    # Sizes the sample catalog only.
    catalog_size: int = Field(default=10_000, ge=100, le=1_000_000)
    catalog_seed: int = 7

    # --- catalog fusion and text vectors (docs/catalog.md) -------------------------------
    fusion_weights: Path | None = Field(
        default=None,
        description="Multi-modal fusion weights (.npz); unset: the documented untrained default.",
    )
    text_encoder: Literal["auto", "minilm", "hashing"] = Field(
        default="auto",
        description="Title vectors: MiniLM when installed (auto), or feature hashing.",
    )

    # --- ranking (retrieval, Thompson sampling, the rules) --------------------------------
    ranking_candidates: int = Field(default=500, ge=1, le=5000)
    # Candidates in a pool an edge ranks a segment's answers from (POST /v1/internal/pools):
    # the best by optimistic score (mean + 2 sd), as relevance.slate pre-selects. 500 (all
    # of a retrieval's) measured on benchmarks.learning: 300 left the edge's ranking behind
    # the origin's (final tenth 51.6% against 48.9% regret, pools refreshed every 5 s).
    pool_size: int = Field(default=500, ge=1, le=5000)
    # The spread of Thompson sampling's draws: 0.3 is plain Thompson sampling, 0 ranks by
    # the posterior means; a request's exploration_rate replaces it (origin.ranking.pipeline).
    exploration_weight: float = Field(default=DEFAULT_CONFIG.exploration_weight, ge=0, le=1)
    # Maximal marginal relevance's weight (0: off) and the emotion rules: options,
    # off by default, each measured by benchmarks.learning.
    diversity_weight: float = Field(default=DEFAULT_CONFIG.diversity_weight, ge=0, le=1)
    emotion_rules: bool = DEFAULT_CONFIG.emotion_rules
    # The graded reward (relevance.item_value): 1 ranks by expected value, an item whose
    # engagements end in purchases above one engaged with as often by clicks only; 0 ranks
    # by engagement alone.
    value_weight: float = Field(default=1.0, ge=0, le=4)
    # Re-sampled runs of the policy that estimate each shown item's propensity.
    propensity_draws: int = Field(default=63, ge=0, le=1000)
    bandit_decay_half_life_s: float = Field(default=604_800.0, ge=0)
    # Users' models (relevance.user_model): the prior's spread (its PRIOR_SCALE, measured
    # there), and the half-life in which an idle user's certainty fades back toward it.
    user_prior_scale: float = Field(default=DEFAULT_CONFIG.user_prior_scale, gt=0, le=10_000)
    # How often the elected worker re-estimates the users' population prior
    # (relevance.population: their mean taste and its spread, from the users it updated
    # lately); 0: never, every user starts from the configured prior.
    population_every_s: float = Field(default=10.0, ge=0)
    # The directions in which users' tastes co-vary that the prior keeps (its rank: a
    # covariance v I + U diag(λ) Uᵀ, so one click moves a user along them); 0: the prior's
    # spread is the same in every direction.
    population_rank: int = Field(default=0, ge=0, le=64)
    user_drift_half_life_s: float = Field(default=604_800.0, ge=0)
    # The version of the configured ranking policy (``configured``, built from the four
    # settings above it: protocol.policies), live until a policy is promoted.
    policy_version: str = Field(default="1", min_length=1, max_length=64)
    # How often an origin reads the deployment pointer: a safety net only, since a
    # promotion reaches every origin through the origins' stream (origin.control) within
    # milliseconds; the poll catches one whose announcement failed after its write.
    policy_poll_s: float = Field(default=30.0, gt=0, le=3600)
    # The share of the decisions the origin ranks whose context it logs (protocol.contexts,
    # about 5 KB each): what offline evaluation (perso evaluate) re-runs candidates on.
    context_log_rate: float = Field(default=0.1, ge=0, le=1)
    # Shadow mode (origin.offline.shadow): a candidate run beside the live policy on a
    # sample of requests, as name:knob=value,... ("" : none), and the share it sees.
    shadow_policy: str = ""
    shadow_rate: float = Field(default=0.05, ge=0, le=1)
    # Requests the origin works on at once; beyond it personalize answers with popular
    # items (degraded) and feedback with 429.
    origin_max_inflight: int = Field(default=256, ge=1)
    # Request bodies the origin reads at most (413 beyond). The largest valid API request
    # (500 excluded ids, 100 feedback items) is under 100 KB: 1 MiB leaves room and still
    # refuses a flood. The catalog ingest takes up to 1000 items with four vectors of up
    # to 1024 numbers each: about 40 MB of JSON.
    origin_max_body_bytes: int = Field(default=1_048_576, ge=1024)
    origin_max_ingest_body_bytes: int = Field(default=64 * 1_048_576, ge=1024)
    # Catalog replicas (origin.catalog.replica): the origin that owns the catalog's vector
    # store (local mode admits one process), which a replica loads its index from and
    # follows; unset: this origin opens the vector store itself. And how long a starting
    # replica tries to reach it before giving up.
    catalog_origin_url: str | None = Field(default=None, pattern=r"^https?://\S+$")
    catalog_origin_wait_s: float = Field(default=120.0, gt=0, le=3600)

    # --- streams --------------------------------------------------------------------------
    # Replicas that must confirm an accepted feedback event before it is acknowledged
    # (WAIT on the partition's node; 0: the primary's answer is enough), and how long to
    # wait for them (redis_client.durable).
    # ``perso up --redis cluster`` sets 1.
    redis_wait_replicas: int = Field(default=0, ge=0, le=16)
    redis_wait_timeout_ms: int = Field(default=100, ge=1, le=10_000)
    # How long the origin tries a feedback's durable append again after a Redis failure
    # (a failover's promotion window, too few replicas confirming) before it answers 503
    # with Retry-After; the append is idempotent, so a repeat is harmless. 0: no retry.
    feedback_retry_ms: int = Field(default=3000, ge=0, le=30_000)
    event_partitions: int = Field(default=8, ge=1, le=1024)
    feedback_dedup_ttl_s: int = Field(default=3600, ge=1)
    # The feedback event log (events:{p}): how long and how many events a partition keeps
    # (origin.worker.retention; never what the workers have not acknowledged yet). The
    # event log's retention is seven days; the cap bounds the memory (about 180 bytes an event).
    event_retention_s: float = Field(default=604_800.0, ge=60)
    event_retention_entries: int = Field(default=1_000_000, ge=1000)
    # The decision log (protocol.decisions) and the logs beside it (contexts, rewards,
    # shadow): how long and how many entries a partition keeps, and the reward window of a
    # decision's join (origin.worker.joins): how long feedback may come, and how soon after
    # the user's next decision it closes.
    decision_retention_s: float = Field(default=604_800.0, ge=60)
    decision_retention_entries: int = Field(default=200_000, ge=1000)
    reward_wait_s: float = Field(default=30.0, gt=0, le=86_400)
    reward_grace_s: float = Field(default=2.0, ge=0, le=3600)

    # --- edge cache (the segment cache key's TTLs, seconds) ---------------------------------
    edge_ttl_power_s: int = Field(default=300, ge=1)
    edge_ttl_active_s: int = Field(default=600, ge=1)
    edge_ttl_casual_s: int = Field(default=900, ge=1)
    edge_ttl_session_cap_s: int = Field(default=180, ge=1)
    session_idle_s: int = Field(default=1800, ge=1)
    edge_settle_s: float = Field(default=2.0, gt=0)
    edge_cache_max_mb: int = Field(default=256, ge=1)
    edge_fill_items: int = Field(default=50, ge=1, le=100)
    edge_user_views_max: int = Field(default=100_000, ge=1)
    # The users' models an edge holds to rank for them (edge.user_models): a memory budget.
    edge_user_models_mb: int = Field(default=64, ge=1)
    # The banks of runs an edge serves its users' next requests over one pool from
    # (edge.run_banks): a memory budget, about 23 KB a user at 20 items; 0: none, every
    # request ranked at the edge draws all its runs.
    edge_run_banks_mb: int = Field(default=64, ge=0)
    # Every user the edge knows anything of ranked at the edge from their segment's pool
    # and their own model (edge.pool_answer); false: the origin ranks them, each answer
    # cached for the user.
    edge_ranking: bool = True
    # A known user ranked at the edge is ranked from their segment's pool joined with the
    # items nearest their own model, this many (edge.ranking.own_candidates: the origin's
    # collaborative share of 500 candidates), retrieved from the catalog's vectors the edge
    # holds (edge.ranking.item_vectors, about 13 MB for 100K items); 0: from the pool alone,
    # and no item vectors held.
    edge_own_candidates: int = Field(default=175, ge=0, le=500)
    # How long the own candidates' rows an edge finds missing are gathered before one call
    # asks the origin for them (edge.ranking.own_candidates): at most one call per context
    # cell in that time. 0: a call as soon as one is missing and none is in flight.
    edge_own_candidates_gather_s: float = Field(default=5.0, ge=0, le=300)
    # Feedback the origin cannot take now (every origin down or overloaded), held on the
    # edge's disk and handed on when it can (edge.origins.feedback_spool): at most this many
    # requests per edge process; 0: no spool, such feedback is refused (503).
    edge_feedback_spool_max: int = Field(default=100_000, ge=0)
    # Where; unset: <PERSO_DATA_DIR>/edge-feedback/<region>. The processes of a PoP share it.
    edge_feedback_spool_dir: Path | None = None
    # How long a segment's pool is fresh: its posteriors are what the edge ranks by, so they
    # age with it (a refresh is one origin call for the whole segment).
    edge_pool_ttl_s: float = Field(default=60.0, gt=0)
    origin_timeout_ms: int = Field(default=1000, ge=1)
    # An edge's budget for a feedback call, retries included: above a Redis failover's
    # promotion window and the origin's own retries of the append (PERSO_FEEDBACK_RETRY_MS),
    # so that a failover makes feedback slower, not held or refused.
    edge_feedback_timeout_ms: int = Field(default=5000, ge=1, le=60_000)
    # An edge's origins (edge.origin_pool): how often each one's /readyz is asked, and the
    # outlier ejection: after this many outages in a row an origin leaves the rotation for
    # the base time, doubled by each ejection that follows without a success, up to the cap.
    origin_health_interval_s: float = Field(default=2.0, gt=0, le=3600)
    origin_eject_after: int = Field(default=3, ge=1, le=1000)
    origin_eject_base_s: float = Field(default=2.0, gt=0, le=3600)
    origin_eject_max_s: float = Field(default=60.0, gt=0, le=86_400)
    # How long past its TTL an entry may still be served when the origin fails.
    edge_stale_if_error_s: int = Field(default=3600, ge=0)
    # How long a request waits for another request's fill of its key before its own.
    edge_coalesce_wait_ms: int = Field(default=1500, ge=1)
    edge_max_body_bytes: int = Field(default=65_536, ge=1024)
    # Layer 3: fills an edge may make per second for returning power/active users' next
    # keys after their feedback (0: none).
    edge_prewarm_per_s: float = Field(default=50.0, ge=0)
    # Where an edge keeps its entries: this process (memory) or a PoP-local Redis
    # shared by the edge processes of one PoP (redis, at PERSO_EDGE_STORE_URL).
    edge_store: Literal["memory", "redis"] = "memory"
    edge_store_url: str | None = None
    # The edge's name for its sync cursor in a PoP-local store (each process of a PoP its
    # own); unset: the region. Only used with PERSO_EDGE_STORE=redis.
    edge_name: str | None = None

    # --- credentials ----------------------------------------------------------------------
    origin_token: SecretStr | None = Field(
        default=None,
        description="Bearer token edges present to the origin; unset: origin API is open.",
    )
    # One token per edge (or other part) the origin accepts besides PERSO_ORIGIN_TOKEN:
    # name=token, comma-separated; each revocable alone (origin/service_identities.py).
    service_tokens: SecretStr | None = Field(
        default=None,
        description="Named service tokens, name=token comma-separated; each revocable alone.",
    )
    # The token this edge presents to its origins: its own identity among the origins'
    # PERSO_SERVICE_TOKENS. Unset: PERSO_ORIGIN_TOKEN, the identity ``shared``.
    edge_service_token: SecretStr | None = Field(
        default=None,
        description="The token this edge presents to its origins; unset: PERSO_ORIGIN_TOKEN.",
    )
    admin_token: SecretStr | None = Field(
        default=None,
        description="Bearer token of the admin endpoints; unset: admin endpoints answer 401.",
    )

    # User tokens (protocol.identity): the origin signs with the first key, edges verify
    # with every one. Comma-separated secrets of at least 16 characters.
    identity_keys: SecretStr | None = Field(
        default=None,
        description="HMAC keys of user tokens; unset: no tokens, edges refuse to start.",
    )
    # Customers' backends: name:tier:secret,... (origin.api_keys).
    api_keys: SecretStr | None = Field(
        default=None, description="API keys that may ask the origin for user tokens."
    )
    token_ttl_s: int = Field(default=3600, ge=60, le=7 * 86_400)
    # The storefront demo's token route on edges (edge.demo_tokens): POST
    # /v1/demo/token asks the origin for a user token with PERSO_DEMO_API_KEY, as a shop's
    # backend does, and hands it to whoever asks. For demos only (perso up --demo): off, the
    # route answers 404.
    demo_tokens: bool = False
    demo_api_key: SecretStr | None = Field(
        default=None,
        description="The API key (a secret of PERSO_API_KEYS) the demo token route uses; "
        "perso up --demo sets the stack's own.",
    )

    # The origin's locks (origin.locks): model deployment, catalog promotion, per-user
    # preference changes. ``redis``: the origin's Redis; ``redlock``: a quorum of the
    # independent Redis nodes of PERSO_LOCK_REDLOCK_URLS; ``postgres``: advisory locks in the
    # database of PG_DSN.
    lock_backend: Literal["redis", "redlock", "postgres"] = "redis"
    lock_redlock_urls: Annotated[tuple[str, ...], NoDecode] = ()
    pg_dsn: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("PG_DSN"),
        description="PostgreSQL of the advisory-lock backend (PERSO_LOCK_BACKEND=postgres).",
    )

    # The LLM tier (origin.llm). The router sends simple explanations to the small model and
    # complex reasoning to the large one (tiered models); the large one may live on
    # a server of its own. Prices are per 1,000 tokens, input and output together.
    llm_small_model: str = "llama-3.1-8b-instruct"
    llm_large_model: str = "llama-3.1-70b-instruct"
    llm_large_base_url: str | None = None  # unset: LLM_BASE_URL
    llm_timeout_ms: int = Field(default=200, ge=10, le=60_000)  # the LLM latency budget
    llm_daily_budget_usd: float = Field(default=50.0, ge=0)
    llm_small_usd_per_1k_tokens: float = Field(default=0.0002, ge=0)
    llm_large_usd_per_1k_tokens: float = Field(default=0.0009, ge=0)
    llm_rate_per_s: float = Field(default=50.0, gt=0)  # calls to the model servers, per process
    llm_cache_ttl_s: int = Field(default=3600, ge=1)  # response caching: explanations change slowly
    # How often the elected origin pre-computes segment explanations (0: never).
    llm_precompute_every_s: float = Field(default=1800.0, ge=0)
    # How the model is held to the explanation's JSON: OpenAI's JSON mode (any server), or
    # a GBNF grammar of the exact shape (llama.cpp's server: weights in [0, 1], bounded
    # lengths; origin.llm.grammar).
    llm_output_constraint: Literal["json_object", "gbnf"] = "json_object"
    # Start the model for the likeliest top item while personalize ranks (speculative
    # execution); off for a model slower than a personalize request may wait (a CPU model:
    # seconds).
    llm_speculate: bool = True
    # Threads of the local model server of `perso up --llm local` (perso.local_llm).
    llm_local_threads: int = Field(default=1, ge=1, le=64)

    workers: int = Field(default=1, ge=0, le=64)
    # Micro-batches of the stream worker (micro-batching: 100 updates or 100 ms).
    worker_batch_size: int = Field(default=100, ge=1, le=10_000)
    worker_max_wait_ms: int = Field(default=100, ge=0, le=60_000)
    # A pending entry idle this long belongs to a worker presumed dead: another reclaims it.
    worker_claim_idle_ms: int = Field(default=30_000, ge=100)
    # Tiered freshness, under overload only: while a worker is at least
    # freshness_overload_lag_s behind (0: always, the tiers' steady state), it may defer an
    # active / casual user's interactions this long before applying them; power users are
    # always real-time. Caught up, every user's feedback is applied at once. 0: real-time.
    freshness_active_s: float = Field(default=300.0, ge=0)
    freshness_casual_s: float = Field(default=3600.0, ge=0)
    freshness_overload_lag_s: float = Field(default=10.0, ge=0)
    redis_server_bin: Path | None = None
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"

    # The checks beyond types and bounds (config.validation), in the order they run.
    _split_lists = field_validator(
        "regions", "lock_redlock_urls", "origin_urls", "ops_scrape_networks", mode="before"
    )(split_comma_list)
    _check_ops_scrape_networks = field_validator("ops_scrape_networks")(check_ops_scrape_networks)
    _check_advertise_url = field_validator("advertise_url")(check_advertise_url)
    _check_origin_urls = field_validator("origin_urls")(check_origin_urls)
    _check_redis_url = field_validator("redis_url", "edge_store_url")(check_redis_url)
    _check_service_tokens = field_validator("service_tokens")(check_service_tokens)
    _check_identity_keys = field_validator("identity_keys")(check_identity_keys)
    _check_together = model_validator(mode="after")(check_together)

    @property
    def catalog_file(self) -> Path | None:
        """The file PERSO_CATALOG names; None for ``sample`` and ``empty``."""
        if self.catalog in (SAMPLE_CATALOG, EMPTY_CATALOG):
            return None
        return Path(self.catalog)

    @property
    def resolved_qdrant_path(self) -> Path:
        return self.qdrant_path or self.data_dir / "qdrant"

    @property
    def identity_key_list(self) -> tuple[bytes, ...]:
        """The identity keys, the signing one first; empty when unset."""
        if self.identity_keys is None:
            return ()
        return parse_keys(self.identity_keys.get_secret_value())

    @property
    def edge_origin_urls(self) -> tuple[str, ...]:
        """The origins an edge calls: ``PERSO_ORIGIN_URLS``, else ``PERSO_ORIGIN_URL``."""
        return self.origin_urls or (self.origin_url,)

    @property
    def origin_timeout_s(self) -> float:
        return self.origin_timeout_ms / 1000


def configured_policy(settings: Settings) -> Policy:
    """The ranking policy the settings configure (``PERSO_EXPLORATION_WEIGHT``,
    ``PERSO_DIVERSITY_WEIGHT``, ``PERSO_EMOTION_RULES``, ``PERSO_USER_PRIOR_SCALE``), named
    ``configured``, version ``PERSO_POLICY_VERSION``: live until a policy is promoted."""
    config = PolicyConfig(
        kind="ranker",
        exploration_weight=settings.exploration_weight,
        diversity_weight=settings.diversity_weight,
        emotion_rules=settings.emotion_rules,
        user_prior_scale=settings.user_prior_scale,
    )
    return Policy(CONFIGURED, settings.policy_version, config)
