"""Every Redis key, stream and consumer-group name, in one place.

Keys that one Lua script touches together share a Redis Cluster hash tag (the part in
braces): all of one user's keys use ``{<user_id>}``, an events partition and its dedup
marks use ``{<partition>}``. Nothing outside this module spells a key string, except the
dedup marks, which are with their TTLs in ``protocol.dedup``, and the names inside a PoP's
entry store, which ``protocol.edge_entry_keys`` lays out under ``edge_entry_prefix``.
"""

from __future__ import annotations

import zlib

# --- per user (hash tag: the user id) ---------------------------------------------------


def user_record(user_id: str) -> str:
    """The user's record (``origin.learned.user_models``): their model (posterior mean and
    variance of their tastes), its compare-and-set version, the window of applied
    observations and the activity day. Written by the stream workers only; no TTL."""
    return f"u:{{{user_id}}}:st"


def user_context(user_id: str) -> str:
    """Hash of the user's latest request context (device, time zone, page, last seen); the
    feedback path reads it to know the context an interaction happened in."""
    return f"u:{{{user_id}}}:ctx"


def user_interactions(user_id: str) -> str:
    """Sorted set of the user's recent interactions (score: time in ms, member: msgpack);
    a member is a pure function of the interaction, so recording it twice is a no-op."""
    return f"u:{{{user_id}}}:ix"


def user_preferences(user_id: str) -> str:
    """Hash of the user's explicit category preferences (``origin.ranking.preferences``): field
    ``c:<category>`` -> signed strength in [-1, 1], plus ``fencing`` (the lease token of the
    last write) and ``seen`` (the highest token presented). No TTL: the user set them."""
    return f"u:{{{user_id}}}:pref"


def user_preferences_resource(user_id: str) -> str:
    """The lock resource a change of the user's preferences holds (the preference lock:
    a distributed lock, 5 s)."""
    return f"preferences:{user_id}"


# The recent interactions: TTL 24 hours; we keep the last 50 (the interaction window).
USER_STATE_TTL_S = 86_400
INTERACTIONS_KEPT = 50

# --- item posteriors (hash tag: the context cell) -----------------------------------------
# A cell's posteriors, its rank and its applied-marks (``protocol.dedup``) share one slot,
# so one Lua script reads a request's candidates in one call, and one script applies a
# closed decision's outcomes atomically, under Redis Cluster too.


def bandit_posteriors(segment: str) -> str:
    """Hash: item id -> packed Beta posterior of its engagement rate in the context cell
    (``origin.learned.posteriors``: alpha, beta, updated ms as three float64); the cell
    ``all`` adds every context's evidence."""
    return f"bandit:{{{segment}}}"


def bandit_values(segment: str) -> str:
    """Hash: item id -> the graded reward of its engagements (``origin.learned.posteriors``:
    engagements, sum of their grades, updated ms as three float64); kept for the
    all-context cell, ``bandit:{all}``."""
    return f"bandit:{{{segment}}}:value"


def bandit_rank(segment: str) -> str:
    """Sorted set of the cell's items by a cautious estimate of their engagement rate
    (``origin.learned.posteriors``); kept for the all-context cell, ``bandit:{all}``."""
    return f"bandit:{{{segment}}}:rank"


# --- catalog (hash tag: the item id) ----------------------------------------------------


def item_vector(item_id: str) -> str:
    """float32 unified vector of an item: the online copy the workers read (no TTL)."""
    return f"item:{{{item_id}}}:vec"


# Hash describing the ingested sample catalog: fingerprint, size, dim, ingested_at.
CATALOG_MANIFEST = "catalog:manifest"
# Bumped by every catalog write (an ingest batch, a sample build), so that a rebuild can
# tell the catalog it copied is still the live one (origin.catalog.rebuild). No TTL.
CATALOG_VERSION = "catalog:version"
# The live catalog slot as a fenced pointer (hash: value, fencing, seen), written under the
# ``catalog-index`` lock when a rebuild promotes its slot. No TTL.
CATALOG_INDEX = "catalog:index"
# The last rebuild's number: slot ``items__r<n>`` (INCR per build). No TTL.
CATALOG_REBUILD_SEQ = "catalog:rebuild:seq"

# --- feedback event streams (hash tag: the partition) -----------------------------------

# Consumer group of the stream workers on every events partition (named ``embedder`` when
# the workers were: the name stays, so that deployed streams keep their pending entries).
WORKER_GROUP = "embedder"


def partition_of(user_id: str, partitions: int) -> int:
    """Stable partition of a user: crc32, not ``hash()``, so every process agrees."""
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    return zlib.crc32(user_id.encode("utf-8")) % partitions


def events_stream(partition: int) -> str:
    """Feedback events of the users hashed to ``partition``: kept by age and size
    (``PERSO_EVENT_RETENTION_*``), never trimmed past what the workers still need."""
    return f"events:{{{partition}}}"


def events_streams(partitions: int) -> list[str]:
    return [events_stream(p) for p in range(partitions)]


def decisions_stream(partition: int) -> str:
    """The decision log of the users hashed to ``partition`` (``protocol.decisions``; the
    personalization results): every answer served. Kept by age and size (the
    retention settings), never trimmed past what the workers still need."""
    return f"decisions:{{{partition}}}"


def rewards_stream(partition: int) -> str:
    """What the answers of the users hashed to ``partition`` earned, one record per closed
    join (``protocol.rewards``): joined to the decision log by request id for offline
    evaluation. Trimmed by age and length as the decision log is."""
    return f"rewards:{{{partition}}}"


def contexts_stream(partition: int) -> str:
    """The context log's partition (``protocol.contexts``): what the ranker saw for a
    sample of the decisions of ``decisions_stream(partition)``, by request id."""
    return f"contexts:{{{partition}}}"


def shadow_stream(partition: int) -> str:
    """The shadow log's partition (``protocol.shadows``): a shadow policy's would-be slates
    for a sample of the decisions of ``decisions_stream(partition)``."""
    return f"shadow:{{{partition}}}"


def decisions_streams(partitions: int) -> list[str]:
    return [decisions_stream(p) for p in range(partitions)]


def decisions_due(partition: int) -> str:
    """Sorted set of the partition's open decisions (member ``<user>\x1f<request_id>``,
    score: when its reward window closes, ms): the workers close what is due."""
    return f"decisions:{{{partition}}}:due"


def user_decision(user_id: str, request_id: str) -> str:
    """Hash of one open decision of the user: ``d`` the decision record, ``e:<item>`` the
    best engagement with each of its items so far. Deleted once its rewards are applied;
    a TTL bounds it should no worker ever close it."""
    return f"u:{{{user_id}}}:dec:{request_id}"


def user_open_decisions(user_id: str) -> str:
    """Sorted set of the user's open decisions (member: request id, score: served at, ms):
    the user's next decision closes the earlier ones (they moved on)."""
    return f"u:{{{user_id}}}:open"


# Position bias (relevance.examination): expected examinations ``x:<k>`` and impressions
# ``n:<k>`` per position, added to by the workers. No TTL.
EXAMINATION = "model:examination"
# The population prior of the users' models (relevance.population, its bytes): written by
# the elected worker when it re-estimates it, read by every worker and origin. No TTL.
POPULATION_PRIOR = "model:population"


def events_accepted(partition: int) -> str:
    """Count of events ever appended to ``events:{partition}`` (the stream itself keeps
    only its retention)."""
    return f"events:{{{partition}}}:accepted"


def worker_stats(consumer: str) -> str:
    """Hash of a stream worker's figures (batches, applied, lag, freshness), refreshed
    every few seconds, expiring when the worker is gone. The process's own: they start
    from 0 when it restarts."""
    return f"worker:{{{consumer}}}:stats"


def worker_totals(consumer: str) -> str:
    """Hash of the counters (batches, applied, ...) of every run under the consumer name,
    summed (``origin.worker.totals``); no TTL: they are totals since the streams began."""
    return f"worker:{{{consumer}}}:totals"


# A run's high-water marks outlive the run by a day: a worker publishes every few seconds,
# and a run whose marks expired would add its whole count again.
WORKER_RUN_TTL_S = 86_400


def worker_run(consumer: str, run_id: str) -> str:
    """Hash of what one run (one worker process) has added to ``worker_totals`` so far,
    counter by counter; TTL ``WORKER_RUN_TTL_S``, renewed by every publish. In the
    totals' slot: one script updates both."""
    return f"worker:{{{consumer}}}:run:{run_id}"


# SCAN patterns of every worker's figures and totals (``perso workers``).
WORKER_STATS_PATTERN = worker_stats("*")
WORKER_TOTALS_PATTERN = worker_totals("*")


def consumer_of(worker_key: str) -> str:
    """The consumer name in ``worker:{<consumer>}:...`` (its hash tag)."""
    return worker_key[worker_key.index("{") + 1 : worker_key.rindex("}")]


def dead_letters(partition: int) -> str:
    """Entries of ``events:{partition}`` that could not be applied, with the reason."""
    return f"events:{{{partition}}}:dead"


# --- an edge's entries in a PoP-local Redis (edge.cache.redis_store) -----------------------


def edge_entry_prefix(region: str) -> str:
    """What every key of a PoP's entry store starts with. The region is its hash tag: a
    store's scripts read its epoch pointer beside an entry's buffers and move keys between
    tag sets, so the whole store is one slot of a Redis Cluster (one shard holds a PoP's
    cache; PoPs spread over the shards). The braces further in its key names are plain
    characters there (only the first ``{...}`` is a hash tag). The names under it are
    ``protocol.edge_entry_keys``'s."""
    return f"edge:{{{region}}}:"


# --- rate limits shared by a PoP's edge processes (edge.limits.pop_rate_limit) ------------
# In the PoP's store. One script checks a request's user limit and its API key's total and
# takes from both or neither, so both keys carry one hash tag: the region and the API key.
# What that means for a huge customer: at one PoP every check of all its users lands on
# one slot, hence one shard's one core (some 50-100K script calls a second). A customer
# near that at one PoP would need its total split into sub-budgets by user hash (a tag per
# sub-budget, each a share of the total), trading an exact total for spread.


def rate_limit_user(region: str, api_key: str, endpoint: str, user_id: str) -> str:
    """The GCRA theoretical arrival time (µs, ``edge.limits.gcra``) of one user of an API key at
    an endpoint, at the PoP of ``region``; expires when that time has passed (an absent key
    is a full burst). User ids are the customer's own: the API key is part of the name."""
    return f"rl:{{{region}:{api_key}}}:u:{endpoint}:{user_id}"


def rate_limit_total(region: str, api_key: str, endpoint: str) -> str:
    """The GCRA theoretical arrival time of all users of an API key together at an
    endpoint, at the PoP of ``region``; expires like a user's."""
    return f"rl:{{{region}:{api_key}}}:t:{endpoint}"


# --- origin-to-edge sync (sync.publisher, sync.subscriber) -------------------------------
# One stream per region (the edge sync queue), and next to it the sequence of the
# last message published to it. The publisher's script touches the origin sequence and every
# region's pair at once, so all of them share one hash tag, ``{sync}``: one slot of a Redis
# Cluster (one shard carries the sync traffic, a few thousand small messages a second at
# most; a publish stays one atomic script).

# The edge sync queue: MaxLen 100000, trimmed approximately (whole radix-tree nodes, cheap) on XADD.
EDGE_SYNC_MAXLEN = 100_000

# The live model and ranking policy: a fenced pointer (hash: ``value`` JSON {epoch,
# model_version, policy}, ``fencing`` of its write, ``seen``), written under the global
# deployment lock (origin.catalog.deployment). No TTL.
MODEL_DEPLOYMENT = "model:deployment"
# Set: the names of the service identities every origin refuses (origin.service_identities).
SERVICE_REVOKED = "service:revoked"

# --- ranking policies (origin.policies.registry; hash tag: ``policies``) -------------------
# One script defines a version and records the name: both keys share a slot.

# The names of every policy ever defined (set; no TTL).
POLICIES = "{policies}"


def policy(name: str) -> str:
    """The versions of the policy ``name`` (hash, no TTL: versions are immutable): field
    ``<version>`` → the configuration (JSON, ``protocol.policies.encode_config``), and
    ``newest`` → the newest version, which the next changed configuration follows."""
    return f"{{policies}}:{name}"


# The origin sequence: the last sequence number assigned to a sync message (no TTL).
EDGE_SYNC_SEQ = "edge_sync:{sync}:seq"


def edge_sync_stream(region: str) -> str:
    """Sync messages for the edges of ``region``; entry fields ``s`` (sequence), ``p`` (the
    sequence of the message before it in this stream), ``t`` (published, ms) and ``m``
    (msgpack body), as in ``sync.codec``. Region names are letters, digits, ``-`` and
    ``_`` (``config.settings``), so no region's keys can be another's."""
    return f"edge_sync:{{sync}}:region:{region}"


def edge_sync_last(region: str) -> str:
    """The sequence of the last message published to the region's stream (no TTL): the
    ``p`` of the next one, so that an edge sees a message go missing."""
    return f"edge_sync:{{sync}}:region:{region}:last"


# The origins' control stream (origin.control): what every origin process must hear from
# the others (a deployed model or promoted policy, a catalog change), published by the same
# script as the regions' streams and chained the same way. ``:origins`` cannot be a
# region's stream, which all end in ``:region:<name>``. Each origin keeps its cursor in
# memory: a fresh one starts at the newest entry.
ORIGINS_SYNC_STREAM = "edge_sync:{sync}:origins"
# The sequence of the last message published to the origins' stream (no TTL), as
# ``edge_sync_last`` is a region's.
ORIGINS_SYNC_LAST = "edge_sync:{sync}:origins:last"
# Entries the origins' stream keeps (MAXLEN ~, on its own publishes): a catalog change names
# up to 1,000 item ids (about 20 KB), and a live origin reads within milliseconds; one that
# falls this far behind finds a gap and reloads the whole catalog, which it would rather
# do than have Redis hold 100,000 such entries.
ORIGINS_SYNC_MAXLEN = 1_000


def edge_sync_cursor(edge: str) -> str:
    """Where the edge named ``edge`` is in its region's sync stream: the id and sequence of
    the last entry it applied (no TTL: losing it makes the edge drop its entries)."""
    return f"edge_sync:cursor:{{{edge}}}"


# --- replication barriers (redis_client.durable) ------------------------------------------


def replication_barrier(tag: str) -> str:
    """A key written only so that ``WAIT`` on its connection confirms every write its
    primary took before it (a worker's barrier before acknowledging a batch); ``tag`` picks
    the primary. Holds ``1``; TTL 60 s."""
    return f"replication:{{{tag}}}"


# --- coordination: locks and fenced pointers (hash tag: the resource) ---------------------
# A lock's key and its fencing counter share a slot, so one script grants the lock and
# draws the fencing token in the same round trip.

# Lock resources (the names passed to ``Lock``), each also a leader election's office.
# The one stream worker that trims every log to its retention (origin.worker.retention).
STREAM_TRIMMER = "stream-trimmer"


def lock(resource: str) -> str:
    """The holder's random token of the lock on ``resource``; TTL: the lease (PX)."""
    return f"lock:{{{resource}}}"


def lock_fencing(resource: str) -> str:
    """The last fencing token granted for ``resource`` (INCR per grant). No TTL: were it to
    expire, tokens would start again at 1 and a fenced store would refuse every new holder."""
    return f"lock:{{{resource}}}:fence"


# --- coordination: idempotent single-flight (coordination.single_flight) -----------------


def idempotency(scope: str, key: str) -> str:
    """The JSON record of one single-flight operation: in progress (TTL: twice the lease),
    done with its result (TTL: the scope's result TTL) or timed out. One key per script, so
    no hash tag."""
    return f"idem:{scope}:{key}"


# --- the LLM tier (origin.llm) -----------------------------------------------------------

# A day's spend outlives its day by one, so a process whose clock is a little behind still
# adds to the right total; after that nobody reads it.
LLM_COST_TTL_S = 2 * 86_400


def llm_cost(day: str) -> str:
    """Float: the US dollars every origin process together spent on model calls on ``day``
    (UTC, ``YYYY-MM-DD``), INCRBYFLOAT per call; TTL ``LLM_COST_TTL_S``."""
    return f"llm:cost:{day}"


def llm_prompt(digest: str) -> str:
    """The model's message for one exact prompt and model size (``digest``: their hash);
    TTL: ``llm_cache_ttl_s``."""
    return f"llm:prompt:{digest}"


def llm_response(digest: str) -> str:
    """JSON explanation for a (segment, category, recommendation source, style) (``digest``:
    their hash), shared by every user of the segment; TTL: ``llm_cache_ttl_s``."""
    return f"llm:resp:{digest}"


# --- operations (hash tag: ops; origin.http.ops, coordination.registry) -------------------

# Entries of the registry are dropped once their heartbeat is this old (a process gone for
# good); until then one that stopped beating shows "unreachable" with its last-seen age.
REGISTRY_FORGET_S = 300


def process_registry() -> str:
    """Hash: process name -> JSON ``{name, kind, region, url, seen_ms}`` of every edge and
    origin process that registered (``coordination.registry``), each field rewritten by its
    heartbeat. No TTL: stale fields are removed by whoever reads it (after
    ``REGISTRY_FORGET_S``)."""
    return "ops:{ops}:registry"


# A minute of the learning curve is kept this long (the page draws the last hour).
LEARNING_CURVE_TTL_S = 2 * 3600


def learning_curve(minute: int) -> str:
    """Hash ``{slates, clicks}``: the decisions whose joins closed in ``minute`` (Unix
    minutes) and the shown items engaged with in them, HINCRBY by the closing worker once
    per batch; TTL ``LEARNING_CURVE_TTL_S``."""
    return f"ops:{{ops}}:curve:{minute}"


def last_evaluation() -> str:
    """String (JSON): the last ``perso evaluate`` report (``origin.offline.report.as_json``
    with ``at_ms``), overwritten by each run; no TTL (the last one stays the last one).
    Exported by the origins' ``/metrics`` as ``perso_evaluation_last_*``."""
    return "ops:{ops}:evaluation"
