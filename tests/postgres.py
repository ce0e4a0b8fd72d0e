"""Where the suite finds a PostgreSQL, for the tests of the PostgreSQL lock backend.

``TEST_POSTGRES_DSN`` names the database (``off`` skips those tests); unset, the suite
probes ``postgresql://postgres@127.0.0.1:5432/test`` (the development and CI machines run
one on loopback) with a 1 s connect timeout. Nothing else in the suite needs PostgreSQL:
without one, these tests are skipped with the reason. (Not ``PERSO_*``: the suite clears
those from the environment.)
"""

from __future__ import annotations

import asyncio
import functools
import os
from concurrent.futures import ThreadPoolExecutor

import asyncpg

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


@functools.cache
def reachable_dsn() -> tuple[str | None, str]:
    """The DSN to test against, or None and why not."""
    dsn = os.environ.get("TEST_POSTGRES_DSN", DEFAULT_DSN)
    if dsn == "off":
        return None, "TEST_POSTGRES_DSN=off"

    async def probe() -> None:
        conn = await asyncpg.connect(dsn, timeout=1)
        await conn.close()

    try:
        # In a thread of its own: callers may be inside a running event loop.
        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(lambda: asyncio.run(probe())).result()
    except Exception as exc:  # unreachable, refused, wrong DSN: all mean "skip, say why"
        return None, f"no PostgreSQL at {dsn} (set TEST_POSTGRES_DSN): {exc!r}"
    return dsn, ""
