"""The PostgreSQL backend of ``coordination.lock.Lock``: session advisory locks.

Mutual exclusion is PostgreSQL's: a lease is a session-level advisory lock on
``advisory_key(table, resource)``, held by one pooled connection pinned to the lease until it
is released or expires. If the process dies or its connection drops, the server frees the
lock with the session: a dead holder never leaves a lock behind.

A table (``perso_lock_leases`` unless told otherwise, created on ``open``) holds, per
resource, the last grant's token, fencing token, backend pid and ``expires_at``. The grant
is one statement: ``pg_try_advisory_lock`` and, only if it returned true, the upsert that
bumps ``fencing`` and returns it, so no grant goes without a fencing token. Rows are never
deleted (ending a lease ends ``expires_at`` and clears ``pid``): fencing tokens keep
increasing across releases.
A resource is held when its row has not expired *and* the row's backend holds the advisory
lock (``pg_locks``): a holder whose connection died holds nothing, whatever its row says.

TTLs are the database clock's (``clock_timestamp()``): ``extend`` and ``release`` compare the
token and require ``expires_at`` still ahead, so a lapsed lease is dead even before anyone
notices. Noticing is the monitor's job: one task per ``PostgresLock`` wakes at the next
expiry of its own leases, unlocks them and gives their pinned connections back to the pool.

The monitor of a paused process cannot run, and its lapsed session still holds the advisory
lock. So a ``try_acquire`` refused behind an expired row that still names a backend takes the
resource over: a lease of this instance is ended locally; another process's holder has its
backend terminated (``pg_terminate_backend(pid, timeout)``, which waits for the exit) and the
grant is tried once more. Terminating the right session: a session never goes back to the
pool while a row names it (ending a lease clears ``pid`` in the statement that unlocks; a
session in doubt, after an error or a cancel, is closed instead), so an expired row naming
a backend that holds the key names the lapsed holder; the row is locked ``FOR UPDATE`` and
re-checked while its backend is terminated, so a grant landing meanwhile is left alone. The
paused holder wakes to a closed connection: its ``extend`` and ``release`` answer False.
Terminating needs the same role as the holders (or ``pg_signal_backend``).

Costs: each held lease pins a connection, so ``max_connections`` bounds the leases held at
once (an acquire beyond it waits for a connection). Two resources whose 64-bit keys collide
(odds 2**-64 per pair) exclude each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from coordination.heartbeat import Heartbeat
from coordination.lock import Lease, LockInfo, acquire_with_retry
from coordination.postgres_leases import (
    DEFAULT_TABLE,
    LeaseStatements,
    advisory_key,
    check_table_name,
    lock_object,
)
from coordination.retry import DEFAULT, RetryPolicy

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Held:
    """A lease of this instance and the connection whose session holds its advisory lock."""

    lease: Lease
    conn: PoolConnectionProxy[asyncpg.Record]
    # One statement at a time on the pinned connection (extend, release, the monitor).
    guard: asyncio.Lock = field(default_factory=asyncio.Lock)


class PostgresLock:
    """Leases on resources of one PostgreSQL database; ``clock`` stamps
    ``Lease.acquired_at``. Make one with ``open`` and ``close`` it."""

    def __init__(
        self,
        pool: asyncpg.Pool[asyncpg.Record],
        clock: Callable[[], float],
        *,
        table: str = DEFAULT_TABLE,
        rng: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        takeover_wait_ms: int = 1000,
    ) -> None:
        self._pool = pool
        self._clock = clock
        self._table = check_table_name(table)
        self._sql = LeaseStatements.for_table(table)
        self._rng = rng if rng is not None else random.Random().random
        self._sleep = sleep
        self._takeover_wait_ms = takeover_wait_ms
        self._held: dict[str, _Held] = {}  # by token
        self._changed = asyncio.Event()
        self._next_check = 0.0  # the monitor's next wake, on the event loop's clock
        self._monitor: asyncio.Task[None] | None = None

    @classmethod
    async def open(
        cls,
        dsn: str,
        clock: Callable[[], float],
        *,
        table: str = DEFAULT_TABLE,
        max_connections: int = 32,
        connect_timeout_s: float = 5.0,
        rng: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        takeover_wait_ms: int = 1000,
    ) -> PostgresLock:
        """Connect, create the lease table if it is missing, start the expiry monitor."""
        check_table_name(table)
        pool = await asyncpg.create_pool(
            dsn,
            min_size=1,
            max_size=max_connections,
            timeout=connect_timeout_s,
            reset=_as_released,
        )
        try:
            async with pool.acquire() as conn, conn.transaction():
                # Concurrent CREATE TABLE IF NOT EXISTS can still collide: one at a time.
                await conn.execute(
                    "SELECT pg_advisory_xact_lock($1)", advisory_key(f"{table}:ddl", "")
                )
                await conn.execute(LeaseStatements.for_table(table).create)
        except BaseException:
            await pool.close()
            raise
        lock = cls(
            pool, clock, table=table, rng=rng, sleep=sleep, takeover_wait_ms=takeover_wait_ms
        )
        lock._monitor = asyncio.create_task(lock._watch(), name=f"postgres-lock:{table}")
        return lock

    async def close(self) -> None:
        """Stop the monitor, give up every lease held here, close the pool."""
        monitor, self._monitor = self._monitor, None
        if monitor is not None:
            monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await monitor
        for token in list(self._held):
            await self._end(token)
        await self._pool.close()

    async def acquire(self, resource: str, ttl_ms: int, *, retry: RetryPolicy = DEFAULT) -> Lease:
        """Retries the grant (takeover included) under ``retry``; then ``LockNotAcquired``."""
        return await acquire_with_retry(
            self.try_acquire, resource, ttl_ms, retry, rng=self._rng, sleep=self._sleep
        )

    async def try_acquire(self, resource: str, ttl_ms: int) -> Lease | None:
        """One grant statement, its connection pinned if granted; a lapsed holder is taken over."""
        if ttl_ms <= 0:
            raise ValueError("a lease needs a positive TTL")
        lease, lapsed = await self._grant(resource, ttl_ms)
        if lease is None and lapsed is not None and await self._take_over(resource, lapsed):
            lease, _ = await self._grant(resource, ttl_ms)
        return lease

    async def release(self, lease: Lease) -> bool:
        """The release statement on the pinned connection; False for a lease not held here."""
        held = self._held.get(lease.token)
        if held is None or held.lease.resource != lease.resource:
            return False
        return await self._end(lease.token)

    async def is_locked(self, resource: str) -> bool:
        """One ``holder`` query: an unexpired row whose backend still holds the advisory lock."""
        return await self._holder(resource) is not None

    async def extend(self, lease: Lease, ttl_ms: int) -> bool:
        """The extend statement on the pinned connection; if refused or cut off, ends the lease."""
        if ttl_ms <= 0:
            raise ValueError("a lease needs a positive TTL")
        held = self._held.get(lease.token)
        if held is None or held.lease.resource != lease.resource:
            return False
        async with held.guard:
            if self._held.get(lease.token) is not held:
                return False
            try:
                # On the pinned connection: a success also proves the session, and so the
                # advisory lock, is still alive.
                fencing = await held.conn.fetchval(
                    self._sql.extend, lease.resource, lease.token, ttl_ms
                )
            except Exception:
                if not _session_ended(held.conn):
                    raise
                fencing = None
        if fencing is None:
            await self._end(lease.token)
            return False
        self._wake_monitor_by(ttl_ms)
        return True

    async def info(self, resource: str) -> LockInfo | None:
        """One ``holder`` query: the live row's token and fencing, ms left by the database clock."""
        row = await self._holder(resource)
        if row is None:
            return None
        return LockInfo(resource, row["token"], row["fencing"], row["remaining_ms"])

    def keep(self, lease: Lease, every_s: float) -> Heartbeat:
        """An ``async with`` that renews ``lease`` every ``every_s`` seconds; its ``lost``
        event is set when a renewal fails."""
        return Heartbeat(self, lease, every_s, sleep=self._sleep)

    async def _grant(self, resource: str, ttl_ms: int) -> tuple[Lease | None, str | None]:
        """The lease, or None and the token of a lapsed lease in the way (if any)."""
        token = secrets.token_hex(16)
        acquired_at = self._clock()
        key = advisory_key(self._table, resource)
        conn = await self._pool.acquire()
        answered = False
        fencing: int | None = None
        lapsed: str | None = None
        try:
            row = await conn.fetchrow(self._sql.grant, key, resource, token, ttl_ms)
            answered = True
            if row is not None:
                fencing, lapsed = row["fencing"], row["lapsed"]
        except Exception:
            # A session that ended holds nothing: the grant did not happen.
            if not _session_ended(conn):
                raise
        finally:
            if not answered:
                # Failed or cancelled, the grant may have been made: end the session, which
                # frees its lock and keeps its pid, named by the row, out of the pool.
                _discard(conn)
            elif fencing is None:
                await self._give_back(conn)
        if fencing is None:
            return None, lapsed
        lease = Lease(resource, token, fencing, acquired_at, ttl_ms)
        self._held[token] = _Held(lease, conn)
        self._wake_monitor_by(ttl_ms)
        return lease, None

    async def _take_over(self, resource: str, token: str) -> bool:
        """Free ``resource`` if the lapsed lease ``token`` still holds its advisory lock;
        True if so."""
        if token in self._held:
            await self._end(token)
            return True
        classid, objid = lock_object(advisory_key(self._table, resource))
        ended = await self._pool.fetchval(
            self._sql.terminate, resource, classid, objid, self._takeover_wait_ms
        )
        if ended:
            log.warning("terminated the session of a lapsed lease on %r", resource)
        return bool(ended)

    async def evict(self, resource: str, token: str) -> bool:
        """Force release: free ``resource`` from the lease ``token``, live or not, here or
        in another process (whose session is ended). True if it held the resource."""
        if token in self._held:
            return await self._end(token) if self._held[token].lease.resource == resource else False
        classid, objid = lock_object(advisory_key(self._table, resource))
        ended = await self._pool.fetchval(
            self._sql.evict, resource, classid, objid, self._takeover_wait_ms, token
        )
        if ended:
            log.warning("force release: ended the session holding %r", resource)
        return bool(ended)

    async def _holder(self, resource: str) -> asyncpg.Record | None:
        classid, objid = lock_object(advisory_key(self._table, resource))
        return await self._pool.fetchrow(self._sql.holder, resource, classid, objid)

    async def _end(self, token: str) -> bool:
        """Give up a lease of this instance, whatever its state: end and disown its row,
        unlock, give the connection back. True if the lease had not expired."""
        held = self._held.get(token)
        if held is None:
            return False
        async with held.guard:
            if self._held.get(token) is not held:
                return False  # ended meanwhile (release, monitor, takeover)
            # Still listed while the statement runs: a takeover that finds this lease in its
            # way waits for this end rather than terminating our own session.
            lease, conn = held.lease, held.conn
            row: asyncpg.Record | None = None
            try:
                row = await conn.fetchrow(
                    self._sql.release,
                    lease.resource,
                    lease.token,
                    advisory_key(self._table, lease.resource),
                )
            except Exception:
                if not _session_ended(conn):
                    raise
            finally:
                # Whatever happened, this lease is over.
                del self._held[token]
                if row is None:
                    _discard(conn)  # the row may still name this session: never reuse it
                else:
                    await self._give_back(conn)
        return row is not None and bool(row["released"])

    async def _give_back(self, conn: PoolConnectionProxy[asyncpg.Record]) -> None:
        try:
            await self._pool.release(conn)
        except Exception:
            # The pool terminated the connection: the session, and its locks, are gone.
            log.debug("connection terminated on release", exc_info=True)

    def _wake_monitor_by(self, ttl_ms: int) -> None:
        """Make sure the monitor checks again by the time a lease of ``ttl_ms`` expires."""
        if asyncio.get_running_loop().time() + ttl_ms / 1000 < self._next_check:
            self._changed.set()

    async def _watch(self) -> None:
        """The expiry monitor: wake at the next expiry of a lease held here (or earlier,
        for a lease granted or extended since), end every lease the database says is over."""
        loop = asyncio.get_running_loop()
        while True:
            self._changed.clear()
            self._next_check = math.inf  # a grant during the check wakes the next one
            try:
                wait_s = await self._expire_due()
            except Exception:
                log.warning("lease monitor: check failed, retrying", exc_info=True)
                wait_s = 0.1
            self._next_check = math.inf if wait_s is None else loop.time() + wait_s
            # Not wait_for: on 3.11 it loses a cancel that races the event being set.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_s):
                    await self._changed.wait()

    async def _expire_due(self) -> float | None:
        """End the leases that lapsed or were taken over; seconds until the next expiry."""
        if not self._held:
            return None
        current = list(self._held.values())
        rows = await self._pool.fetch(
            self._sql.remaining, list({h.lease.resource for h in current})
        )
        left = {row["resource"]: (row["token"], row["remaining_ms"]) for row in rows}
        next_ms: int | None = None
        for held in current:
            token, remaining_ms = left.get(held.lease.resource, (None, 0))
            if token != held.lease.token or remaining_ms <= 0:
                await self._end(held.lease.token)
            elif next_ms is None or remaining_ms < next_ms:
                next_ms = remaining_ms
        return None if next_ms is None else next_ms / 1000


async def _as_released(_: object) -> None:
    """The pool's reset, which is nothing: asyncpg's default (``pg_advisory_unlock_all``
    and more) costs a round trip per attempt, and sessions come back holding no lock
    already (a refused grant took none, ``_end`` unlocks, a session in doubt is ended)."""


def _session_ended(conn: PoolConnectionProxy[asyncpg.Record]) -> bool:
    """Whether the pinned connection's session is gone (and its advisory lock with it)."""
    try:
        return conn.is_closed()
    except asyncpg.InterfaceError:
        # The pool detaches a proxy whose connection closed under it.
        return True


def _discard(conn: PoolConnectionProxy[asyncpg.Record]) -> None:
    """End the connection's session; the pool replaces it."""
    with contextlib.suppress(asyncpg.InterfaceError):
        conn.terminate()
