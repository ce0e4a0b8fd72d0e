"""The lease table of ``coordination.postgres_lock`` and how its resources become keys.

Pure parts apart from the lock: the advisory key of a resource (a keyed 8-byte BLAKE2b), how
``pg_locks`` names that key, which table names may be spliced into SQL, and every statement
the lock runs, one round trip each, with their parameters above them.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

DEFAULT_TABLE = "perso_lock_leases"

_TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def check_table_name(table: str) -> str:
    """``table`` if it is a plain lower-case SQL identifier; it is spliced into statements."""
    if not _TABLE_NAME.fullmatch(table):
        raise ValueError(f"not a plain lower-case SQL identifier: {table!r}")
    return table


def advisory_key(namespace: str, resource: str) -> int:
    """The signed 64-bit advisory lock key of ``resource``: an 8-byte BLAKE2b digest keyed by
    ``namespace`` (the table's name), so lock spaces sharing a database stay apart."""
    digest = hashlib.blake2b(resource.encode(), digest_size=8, key=namespace.encode()).digest()
    return int.from_bytes(digest, "big", signed=True)


def lock_object(key: int) -> tuple[int, int]:
    """How ``pg_locks`` names a bigint advisory key: (classid, objid), its high and low
    32 bits as unsigned oids (with ``objsubid`` 1)."""
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    return unsigned >> 32, unsigned & 0xFFFF_FFFF


@dataclass(frozen=True, slots=True)
class LeaseStatements:
    """The SQL of one lease table. Parameters are listed above each statement."""

    create: str
    grant: str
    terminate: str
    evict: str
    holder: str
    extend: str
    release: str
    remaining: str

    @classmethod
    def for_table(cls, table: str) -> LeaseStatements:
        """The statements of the lease table ``table``, its name checked first (``ValueError``
        unless a plain lower-case identifier), since it is spliced into every statement."""
        t = check_table_name(table)
        return cls(
            create=_create(t),
            grant=_grant(t),
            terminate=_terminate(t),
            evict=_evict(t),
            holder=_holder(t),
            extend=_extend(t),
            release=_release(t),
            remaining=_remaining(t),
        )


def _holds(classid: str, objid: str) -> str:
    """True when the row's backend holds the lock (classid, objid: ``lock_object(key)``)."""
    return f"""EXISTS (
    SELECT 1 FROM pg_locks AS l
    WHERE l.locktype = 'advisory' AND l.granted AND l.pid = r.pid
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.classid = {classid} AND l.objid = {objid} AND l.objsubid = 1)"""


# The milliseconds a row's lease has left (negative once expired).
_REMAINING_MS = "ceil(extract(epoch FROM r.expires_at - clock_timestamp()) * 1000)::bigint"


def _create(t: str) -> str:
    return f"""
CREATE TABLE IF NOT EXISTS {t} (
    resource text PRIMARY KEY,
    token text NOT NULL,
    fencing bigint NOT NULL,
    pid integer,  -- the holder's backend; NULL once the lease was given up
    expires_at timestamptz NOT NULL
)"""


def _grant(t: str) -> str:
    # $1 key, $2 resource, $3 token, $4 ttl ms. ``fencing``: the grant's fencing
    # token, NULL when the resource is held. ``lapsed``: the token of an expired lease
    # whose session was never given up (a takeover candidate). The CTE runs the
    # try-lock once; the row is written only if it returned true. The update computes
    # its own expiry: it may have waited for the row lock (a takeover's), and a lease
    # must not be born already expired.
    return f"""
WITH got AS MATERIALIZED (SELECT pg_try_advisory_lock($1) AS ok), granted AS (
    INSERT INTO {t} AS r (resource, token, fencing, pid, expires_at)
    SELECT $2, $3, 1, pg_backend_pid(), clock_timestamp() + $4 * interval '1 millisecond'
    FROM got WHERE ok
    ON CONFLICT (resource) DO UPDATE SET
        token = EXCLUDED.token, fencing = r.fencing + 1, pid = EXCLUDED.pid,
        expires_at = clock_timestamp() + $4 * interval '1 millisecond'
    RETURNING fencing
)
SELECT (SELECT fencing FROM granted) AS fencing,
       (SELECT token FROM {t}
        WHERE resource = $2 AND expires_at <= clock_timestamp() AND pid IS NOT NULL) AS lapsed"""


def _terminate(t: str) -> str:
    # $1 resource, $2 classid, $3 objid, $4 wait ms. True if a lapsed holder's backend
    # was terminated. The row lock keeps a new grant of the resource out meanwhile.
    return f"""
WITH lapsed AS MATERIALIZED (
    SELECT r.pid FROM {t} AS r
    WHERE r.resource = $1 AND r.expires_at <= clock_timestamp()
      AND r.pid <> pg_backend_pid() AND {_holds(classid="$2", objid="$3")}
    FOR UPDATE OF r
)
SELECT pg_terminate_backend(pid, $4) FROM lapsed"""


def _evict(t: str) -> str:
    # $1 resource, $2 classid, $3 objid, $4 wait ms, $5 token. Force release: ends
    # the session of the holder of ``token`` whatever its expiry. True if ended.
    return f"""
WITH holder AS MATERIALIZED (
    SELECT r.pid FROM {t} AS r
    WHERE r.resource = $1 AND r.token = $5
      AND r.pid <> pg_backend_pid() AND {_holds(classid="$2", objid="$3")}
    FOR UPDATE OF r
)
SELECT pg_terminate_backend(pid, $4) FROM holder"""


def _holder(t: str) -> str:
    # $1 resource, $2 classid, $3 objid. The holder: token, fencing, ms left.
    return f"""
SELECT r.token, r.fencing, {_REMAINING_MS} AS remaining_ms FROM {t} AS r
WHERE r.resource = $1 AND r.expires_at > clock_timestamp()
  AND {_holds(classid="$2", objid="$3")}"""


def _extend(t: str) -> str:
    # $1 resource, $2 token, $3 ttl ms. A row if the lease held and was extended.
    return f"""
UPDATE {t} SET expires_at = clock_timestamp() + $3 * interval '1 millisecond'
WHERE resource = $1 AND token = $2 AND expires_at > clock_timestamp()
RETURNING fencing"""


def _release(t: str) -> str:
    # $1 resource, $2 token, $3 key. Ends the lease and disowns its row, so that
    # the row never names a backend that went back to the pool. ``released``: the
    # lease had not expired.
    return f"""
WITH old AS (
    SELECT expires_at > clock_timestamp() AS live FROM {t} WHERE resource = $1 AND token = $2
), ended AS (
    UPDATE {t} SET pid = NULL, expires_at = least(expires_at, clock_timestamp())
    WHERE resource = $1 AND token = $2
    RETURNING 1
)
SELECT coalesce((SELECT live FROM old), false) AS released,
       (SELECT count(*) FROM ended) AS disowned,
       pg_advisory_unlock($3) AS unlocked"""


def _remaining(t: str) -> str:
    # $1 resources. Each row's token and ms left (negative once expired).
    return f"""
SELECT r.resource, r.token, {_REMAINING_MS} AS remaining_ms FROM {t} AS r
WHERE r.resource = ANY($1::text[])"""
