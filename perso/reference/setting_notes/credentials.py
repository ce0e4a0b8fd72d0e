"""The configuration page's notes on credentials and locks: service and admin tokens,
user tokens, API keys, the demo's token route and the lock backends.

Data: one entry per setting, in the order of ``config.settings``.
"""

from __future__ import annotations

from perso.reference.setting_notes.note import Note

CREDENTIALS_NOTES: dict[str, Note] = {
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
}
