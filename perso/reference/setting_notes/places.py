"""The configuration page's notes on the outside services (Redis, Qdrant, the model
server) and where things live: the data directory, hosts, ports, TLS, origins, regions.

Data: one entry per setting, in the order of ``config.settings``.
"""

from __future__ import annotations

from perso.reference.setting_notes.note import Note

PLACES_NOTES: dict[str, Note] = {
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
}
