"""``coordination.PostgresLock`` against a real PostgreSQL: the lock contract
(``tests.integration.lock_contract``) and what only this backend promises.

Runs against the suite's PostgreSQL (``tests/postgres.py``: a server of its own, or
``TEST_POSTGRES_DSN``), skipped with the reason when there is none. The role needs CREATE
on the database (each test makes its own lease table and drops it after).

Expiry is the database clock's, so the expiry tests wait real milliseconds with short TTLs;
the lock's clock only stamps leases and is a fake. A paused holder is a real process,
stopped with SIGSTOP while its lease lapses.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import secrets
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest

from coordination.instrumented import InstrumentedLock
from coordination.postgres_leases import advisory_key, lock_object
from coordination.postgres_lock import PostgresLock
from tests.fakes import FakeClock
from tests.integration.lock_contract import LockContract

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def table(postgres_dsn: str) -> AsyncIterator[str]:
    """A lease table of this test's own, dropped after it."""
    name = f"test_leases_{secrets.token_hex(6)}"
    yield name
    conn = await asyncpg.connect(postgres_dsn)
    try:
        await conn.execute(f"DROP TABLE IF EXISTS {name}")
    finally:
        await conn.close()


@pytest.fixture
async def open_lock(
    postgres_dsn: str, table: str, clock: FakeClock
) -> AsyncIterator[Callable[[], Awaitable[PostgresLock]]]:
    """Opens locks on the test's table, each with its own pool (as another process would);
    closes them after the test."""
    opened: list[PostgresLock] = []

    async def open_one() -> PostgresLock:
        lock = await PostgresLock.open(
            postgres_dsn, clock, table=table, rng=random.Random(7).random
        )
        opened.append(lock)
        return lock

    yield open_one
    for lock in opened:
        await lock.close()


@pytest.fixture
async def lock(open_lock: Callable[[], Awaitable[PostgresLock]]) -> PostgresLock:
    return await open_lock()


@pytest.fixture
async def admin(postgres_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection of the test's own, for what an operator would do by hand."""
    conn = await asyncpg.connect(postgres_dsn)
    yield conn
    await conn.close()


class TestPostgresLockContract(LockContract):
    pass


async def test_the_holder_session_holds_the_advisory_lock(
    lock: PostgresLock, table: str, admin: asyncpg.Connection
) -> None:
    lease = await lock.acquire("deploy", 5000)
    pid = await admin.fetchval(f"SELECT pid FROM {table} WHERE resource = 'deploy'")
    classid, objid = lock_object(advisory_key(table, "deploy"))
    holders = await admin.fetch(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
        " AND classid = $1 AND objid = $2 AND objsubid = 1",
        classid,
        objid,
    )
    assert [row["pid"] for row in holders] == [pid]
    assert await lock.release(lease)
    assert not await admin.fetchval(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = $1", pid
    )


async def test_a_live_holder_in_another_process_is_left_alone(
    open_lock: Callable[[], Awaitable[PostgresLock]],
) -> None:
    one, two = await open_lock(), await open_lock()
    lease = await one.acquire("deploy", 5000)
    assert await two.try_acquire("deploy", 5000) is None
    # The refused grant wrote nothing: same holder, same fencing token.
    info = await two.info("deploy")
    assert info is not None
    assert (info.token, info.fencing) == (lease.token, lease.fencing)
    assert await one.extend(lease, 5000)
    assert await one.release(lease)
    assert (await two.acquire("deploy", 5000)).fencing == lease.fencing + 1


async def test_a_holder_whose_connection_dies_frees_the_resource(
    open_lock: Callable[[], Awaitable[PostgresLock]], table: str, admin: asyncpg.Connection
) -> None:
    one, two = await open_lock(), await open_lock()
    lease = await one.acquire("deploy", 60_000)
    pid = await admin.fetchval(f"SELECT pid FROM {table} WHERE resource = 'deploy'")
    assert await admin.fetchval("SELECT pg_terminate_backend($1, 5000)", pid)
    # The row still names the holder, but the server freed its lock with the session.
    assert not await two.is_locked("deploy")
    second = await two.try_acquire("deploy", 5000)
    assert second is not None
    assert second.fencing > lease.fencing
    assert not await one.extend(lease, 60_000)
    assert not await one.release(lease)
    assert await two.is_locked("deploy")
    # The dead connection went back to the pool, which serves new grants.
    assert await one.try_acquire("other", 5000) is not None


# A holder in a process of its own: acquires, reports, then (after a SIGSTOP and SIGCONT)
# tries to extend and release its lapsed lease and reports again.
_HOLDER = """
import asyncio, json, sys
from coordination.postgres_lock import PostgresLock

async def main(dsn, table):
    lock = await PostgresLock.open(dsn, lambda: 0.0, table=table)
    lease = await lock.acquire("deploy", 200)
    print(json.dumps({"token": lease.token, "fencing": lease.fencing}), flush=True)
    sys.stdin.readline()  # blocks the event loop too: a stop-the-world pause
    extended = await lock.extend(lease, 5000)
    released = await lock.release(lease)
    print(json.dumps({"extended": extended, "released": released}), flush=True)
    await asyncio.wait_for(lock.close(), 5)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


async def test_a_paused_process_lease_is_taken_over_and_its_late_calls_refused(
    lock: PostgresLock, postgres_dsn: str, table: str, admin: asyncpg.Connection
) -> None:
    holder = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _HOLDER,
        postgres_dsn,
        table,
        cwd=REPO,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert holder.stdin is not None
    assert holder.stdout is not None
    try:
        first = json.loads(await asyncio.wait_for(holder.stdout.readline(), 20))
        pid = await admin.fetchval(f"SELECT pid FROM {table} WHERE resource = 'deploy'")
        # Paused past its lease: its monitor cannot run, its session keeps the lock.
        os.kill(holder.pid, signal.SIGSTOP)
        await asyncio.sleep(0.4)
        assert not await lock.is_locked("deploy")
        second = await lock.try_acquire("deploy", 5000)
        assert second is not None
        assert second.fencing == first["fencing"] + 1
        assert not await admin.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid)
        os.kill(holder.pid, signal.SIGCONT)
        holder.stdin.write(b"wake\n")
        await holder.stdin.drain()
        late = json.loads(await asyncio.wait_for(holder.stdout.readline(), 20))
        assert late == {"extended": False, "released": False}
        assert await asyncio.wait_for(holder.wait(), 20) == 0
        info = await lock.info("deploy")
        assert info is not None
        assert info.token == second.token
    finally:
        if holder.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(holder.pid, signal.SIGCONT)
                holder.kill()
            await holder.wait()


async def test_close_gives_up_every_lease(
    open_lock: Callable[[], Awaitable[PostgresLock]],
) -> None:
    one, two = await open_lock(), await open_lock()
    await one.acquire("a", 60_000)
    await one.acquire("b", 60_000)
    await one.close()
    assert not await two.is_locked("a")
    assert await two.try_acquire("b", 5000) is not None


async def test_open_is_idempotent_on_the_table(
    postgres_dsn: str, table: str, clock: FakeClock
) -> None:
    locks = await asyncio.gather(
        *(PostgresLock.open(postgres_dsn, clock, table=table) for _ in range(4))
    )
    try:
        assert (await locks[0].acquire("r", 5000)).fencing == 1
        assert await locks[3].is_locked("r")
    finally:
        for lock in locks:
            await lock.close()


async def test_force_release_ends_a_live_holder_in_another_process(
    open_lock: Callable[[], Awaitable[PostgresLock]],
) -> None:
    holder, operator = await open_lock(), await open_lock()
    lease = await holder.acquire("deploy", 60_000)
    evictor = InstrumentedLock(operator, rng=random.Random(1).random)
    evicted = await evictor.force_release("deploy")
    assert evicted is not None
    assert (evicted.token, evicted.fencing) == (lease.token, lease.fencing)
    assert not await operator.is_locked("deploy")
    # The evicted holder's session is gone: it can neither extend nor release.
    assert not await holder.extend(lease, 60_000)
    assert not await holder.release(lease)
    after = await operator.try_acquire("deploy", 5000)
    assert after is not None
    assert after.fencing > lease.fencing
    assert await evictor.force_release("nothing-held") is None
