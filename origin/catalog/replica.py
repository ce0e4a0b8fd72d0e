"""A catalog replica's source: the catalog origin (``PERSO_CATALOG_ORIGIN_URL``), over HTTP.

With Qdrant local mode one origin process owns the store (``origin.catalog.replication``);
the others load their in-memory index from it through its internal routes, with the
service token edges present (``PERSO_ORIGIN_TOKEN``), in the compact streamed format of
``origin.catalog.snapshot``. They never read the store itself, and need nothing else from
it: ranking, pools and explanations read the in-memory index, the users' vectors live in
Redis (the stream workers mirror them to Qdrant only with a server), and catalog writes are
the catalog origin's.

``load_at_start`` retries with a capped, jittered back-off until the catalog origin
answers, for ``PERSO_CATALOG_ORIGIN_WAIT_S`` at most (it may still be loading its own
catalog), then raises ``CatalogOriginError``: a replica does not start without a catalog.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence

import httpx

from origin.catalog.item_index import ItemIndex
from origin.catalog.snapshot import (
    ITEMS_PATH,
    MEDIA_TYPE,
    SNAPSHOT_PATH,
    Snapshot,
    SnapshotReader,
)
from origin.exceptions import CatalogOriginError
from resilience.backoff import Backoff

log = logging.getLogger(__name__)

# A whole catalog streams for seconds; each read of it must still come within this.
READ_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 2.0
PING_TIMEOUT_S = 1.0
# Back-off while waiting for the catalog origin at start: 0.1 s doubling to 2 s.
RETRY_BASE_S = 0.1
RETRY_CAP_S = 2.0


class CatalogOrigin:
    """The catalog origin as a replica reads it: everything (``snapshot``) or some items
    (``items``), each a ``Snapshot`` with the catalog's mark."""

    def __init__(
        self,
        base_url: str,
        *,
        dim: int,
        token: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._dim = dim
        headers = {"accept": MEDIA_TYPE}
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout,
            transport=transport,
            verify=verify,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def snapshot(self) -> Snapshot:
        """Every item the catalog origin serves now."""
        return await self._read(self._client.build_request("GET", SNAPSHOT_PATH))

    async def items(self, item_ids: Sequence[str]) -> Snapshot:
        """The items of ``item_ids`` the catalog origin serves now (those it does not are
        left out: deleted)."""
        body = {"item_ids": list(item_ids)}
        return await self._read(self._client.build_request("POST", ITEMS_PATH, json=body))

    async def ping(self) -> bool:
        """Whether the catalog origin answers ``/readyz`` now."""
        try:
            answer = await self._client.get("/readyz", timeout=PING_TIMEOUT_S)
        except httpx.HTTPError:
            return False
        return answer.status_code == 200

    async def _read(self, request: httpx.Request) -> Snapshot:
        reader = SnapshotReader(self._dim)
        try:
            response = await self._client.send(request, stream=True)
            try:
                if response.status_code != 200:
                    await response.aread()
                    raise CatalogOriginError(
                        f"catalog origin {self.base_url} answered {response.status_code} to "
                        f"{request.method} {request.url.path}: {response.text[:200]}"
                    )
                async for chunk in response.aiter_bytes():
                    reader.feed(chunk)
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            raise CatalogOriginError(
                f"catalog origin {self.base_url} not reached ({request.url.path}): {exc!r}"
            ) from exc
        return await asyncio.to_thread(reader.finish)


async def index_of(snapshot: Snapshot) -> ItemIndex:
    """The in-memory index of a snapshot, built off the event loop."""
    return await asyncio.to_thread(ItemIndex, snapshot.items, snapshot.vectors)


async def load_at_start(
    source: CatalogOrigin,
    wait_for_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rng: random.Random | None = None,
) -> Snapshot:
    """The catalog origin's whole catalog, asked again after each failure until
    ``wait_for_s`` has passed; then ``CatalogOriginError`` with the last failure."""
    draw = rng or random.Random()
    backoff = Backoff(base_s=RETRY_BASE_S, cap_s=RETRY_CAP_S, jitter="equal", draw=draw.random)
    deadline = clock() + wait_for_s
    while True:
        try:
            return await source.snapshot()
        except CatalogOriginError as exc:
            left = deadline - clock()
            if left <= 0:
                raise CatalogOriginError(
                    f"no catalog from the catalog origin within {wait_for_s:g}s "
                    f"(PERSO_CATALOG_ORIGIN_WAIT_S): {exc}"
                ) from exc
            pause = min(backoff.next(), left)
            log.info("catalog origin not ready (%s); again in %.2fs", exc, pause)
            await sleep(pause)
