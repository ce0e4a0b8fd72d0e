"""The configuration page's notes on the edge: its cache's TTLs and budgets, ranking at
the edge, the feedback spool, its origins and its store.

Data: one entry per setting, in the order of ``config.settings``.
"""

from __future__ import annotations

from perso.reference.setting_notes.note import Note

EDGE_NOTES: dict[str, Note] = {
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
        "memory budget of the users' models an edge holds (model and preferences from the sync "
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
}
