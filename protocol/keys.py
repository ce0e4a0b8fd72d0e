"""Every Redis key, stream and consumer-group name, in one place.

Keys that one Lua script touches together share a Redis Cluster hash tag (the part in
braces): all of one user's keys use ``{<user_id>}``, an events partition and its dedup
marks use ``{<partition>}``. Nothing outside this module spells a key string, except the
dedup marks, which are with their TTLs in ``protocol.dedup``.
"""

from __future__ import annotations

import zlib

# --- per user (hash tag: the user id) ---------------------------------------------------


def user_embedding(user_id: str) -> str:
    """The user's streaming embedding, float16 little-endian (readers also accept float32);
    no TTL."""
    return f"u:{{{user_id}}}:emb"


def user_state(user_id: str) -> str:
    """The stream worker's state of the user (``origin.embedding_state``): version, last
    update, momentum, the window of applied interactions. Its version is the
    compare-and-set token of the embedding too."""
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
    """Hash of the user's explicit category preferences (``origin.preferences``): field
    ``c:<category>`` -> signed strength in [-1, 1], plus ``fencing`` (the lease token of the
    last write) and ``seen`` (the highest token presented). No TTL: the user set them."""
    return f"u:{{{user_id}}}:pref"


def user_preferences_resource(user_id: str) -> str:
    """The lock resource a change of the user's preferences holds (seed 000: a distributed
    lock, 5 s)."""
    return f"preferences:{user_id}"


# Seed 001 "Recent Interactions": TTL 24 hours; we keep the last 50 (seed 000 state).
USER_STATE_TTL_S = 86_400
INTERACTIONS_KEPT = 50

# --- bandit (hash tag: the context segment) --------------------------------------------
# A segment's posteriors, context weights and applied-marks (``protocol.dedup``) share one
# slot, so one Lua script reads a request's 500 candidates and the weights in one call, and
# one script applies an interaction to both atomically, under Redis Cluster too.


def bandit_posteriors(segment: str) -> str:
    """Hash: item id -> packed Beta posterior (alpha, beta, updated ms as three float64)."""
    return f"bandit:{{{segment}}}"


def bandit_weights(segment: str) -> str:
    """float32 vector of the segment's logistic context weights (Algorithm 2)."""
    return f"bandit:{{{segment}}}:w"


# --- catalog (hash tag: the item id) ----------------------------------------------------


def item_vector(item_id: str) -> str:
    """float32 unified vector of an item: the online copy the workers read (no TTL)."""
    return f"item:{{{item_id}}}:vec"


# Hash describing the ingested sample catalog: fingerprint, size, dim, ingested_at.
CATALOG_MANIFEST = "catalog:manifest"
# Bumped by every catalog write (an ingest batch, a sample build), so that a rebuild can
# tell the catalog it copied is still the live one (origin.index_rebuild). No TTL.
CATALOG_VERSION = "catalog:version"
# The live catalog slot as a fenced pointer (hash: value, fencing, seen), written under the
# ``catalog-index`` lock when a rebuild promotes its slot. No TTL.
CATALOG_INDEX = "catalog:index"
# The last rebuild's number: slot ``items__r<n>`` (INCR per build). No TTL.
CATALOG_REBUILD_SEQ = "catalog:rebuild:seq"

# --- feedback event streams (hash tag: the partition) -----------------------------------

# Consumer group of the streaming embedding workers on every events partition.
EMBEDDER_GROUP = "embedder"


def partition_of(user_id: str, partitions: int) -> int:
    """Stable partition of a user: crc32, not ``hash()``, so every process agrees."""
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    return zlib.crc32(user_id.encode("utf-8")) % partitions


def events_stream(partition: int) -> str:
    """Feedback events of the users hashed to ``partition``."""
    return f"events:{{{partition}}}"


def events_streams(partitions: int) -> list[str]:
    return [events_stream(p) for p in range(partitions)]


def events_accepted(partition: int) -> str:
    """Count of events ever appended to ``events:{partition}`` (the stream itself is
    trimmed once its entries are acknowledged)."""
    return f"events:{{{partition}}}:accepted"


def worker_stats(consumer: str) -> str:
    """Hash of a stream worker's figures (batches, applied, lag, freshness), refreshed
    every few seconds, expiring when the worker is gone."""
    return f"worker:{{{consumer}}}:stats"


def dead_letters(partition: int) -> str:
    """Entries of ``events:{partition}`` that could not be applied, with the reason."""
    return f"events:{{{partition}}}:dead"


# --- an edge's entries in a PoP-local Redis (edge.redis_entry_store) ----------------------


def edge_entry_prefix(region: str) -> str:
    return f"edge:{region}:"


ENTRY_SUFFIXES = ("}:A", "}:B", "}:active", "}:tags")


class EdgeEntryKeys:
    """Every key name of one store's prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.epoch = f"{prefix}epoch"
        self.epochs = f"{prefix}epochs"

    def namespace(self, epoch: str) -> str:
        """What every key of ``epoch`` starts with."""
        return f"{self.prefix}e{epoch}:"

    def slot_head(self, epoch: str) -> str:
        return f"{self.namespace(epoch)}{{"

    def slot(self, epoch: str, key: str) -> tuple[str, str, str, str]:
        """Buffer A, buffer B, active pointer and tag set of ``key``."""
        head = self.slot_head(epoch) + key
        a, b, active, tags = (head + suffix for suffix in ENTRY_SUFFIXES)
        return a, b, active, tags

    def tag_head(self, epoch: str) -> str:
        return f"{self.namespace(epoch)}tag:{{"

    TAG_TAIL = "}"

    def tag(self, epoch: str, tag: str) -> str:
        return self.tag_head(epoch) + tag + self.TAG_TAIL


# --- origin-to-edge sync (sync.publisher, sync.subscriber) -------------------------------
# One stream per region (seed 001 "Edge Sync Queue"), and next to it, in its slot, the
# sequence of the last message published to it. The publisher's script touches the origin
# sequence and every region's pair at once: one Redis, not a Cluster (the regions' hash
# tags put their streams in different slots).

# Seed 001: MaxLen 100000, trimmed approximately (whole radix-tree nodes, cheap) on XADD.
EDGE_SYNC_MAXLEN = 100_000

# The live model: a fenced pointer (hash: ``value`` JSON {epoch, model_version},
# ``fencing`` of its write, ``seen``), written under the global deployment lock
# (origin.model_deployment). No TTL.
MODEL_DEPLOYMENT = "model:deployment"

# The origin sequence: the last sequence number assigned to a sync message (no TTL).
EDGE_SYNC_SEQ = "edge_sync:seq"


def edge_sync_stream(region: str) -> str:
    """Sync messages for the edges of ``region``; entry fields ``s`` (sequence), ``p`` (the
    sequence of the message before it in this stream), ``t`` (published, ms) and ``m``
    (msgpack body), as in ``sync.messages``."""
    return f"edge_sync:{{{region}}}"


def edge_sync_last(region: str) -> str:
    """The sequence of the last message published to ``edge_sync:{region}`` (no TTL): the
    ``p`` of the next one, so that an edge sees a message go missing."""
    return f"edge_sync:{{{region}}}:last"


def edge_sync_cursor(edge: str) -> str:
    """Where the edge named ``edge`` is in its region's sync stream: the id and sequence of
    the last entry it applied (no TTL: losing it makes the edge drop its entries)."""
    return f"edge_sync:cursor:{{{edge}}}"


# --- coordination: locks and fenced pointers (hash tag: the resource) ---------------------
# A lock's key and its fencing counter share a slot, so one script grants the lock and
# draws the fencing token in the same round trip.

# Lock resources (the names passed to ``Lock``), each also a leader election's office.
# The one embedding worker that trims the acknowledged entries of every events stream.
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
