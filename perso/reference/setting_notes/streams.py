"""The configuration page's notes on the streams: durable appends, partitions, the
event and decision logs' retention and the reward window.

Data: one entry per setting, in the order of ``config.settings``.
"""

from __future__ import annotations

from perso.reference.setting_notes.note import Note

STREAMS_NOTES: dict[str, Note] = {
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
}
