"""One origin fill per key per PoP (``edge.cache.fill_lease``) on the real Redis: several
processes (each its own client and entry store over one PoP store) asking for one cold key
at once, a leader that fails, a leader that dies, and a store that cannot be reached."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from edge.cache.entry import CachedItem, Entry
from edge.cache.fill_lease import FillLeases
from edge.cache.redis_store import RedisEntryStore
from protocol import keys
from redis_client.client import RedisClient, connect, open_client
from tests.entries import SHARED, K

pytestmark = pytest.mark.cluster

PREFIX = keys.edge_entry_prefix("test-pop")


def entry(label: str, generation: int) -> Entry:
    now = time.time()
    return Entry(
        audience=SHARED,
        items=(CachedItem(label, b'"item_id":"%b"' % label.encode(), b"null"),),
        complete=True,
        model_version=label,
        exploration_applied=False,
        filled_at=now,
        expires_at=now + 60,
        stale_until=now + 120,
        generation=generation,
    )


@dataclass
class Process:
    """One edge process of the PoP: its client, its view of the store, its leases."""

    redis: RedisClient
    store: RedisEntryStore
    leases: FillLeases
    fills: list[str] = field(default_factory=list)
    filling: asyncio.Event = field(default_factory=asyncio.Event)  # set by its first fill

    async def fill(self, key: str, *, fail: bool = False) -> Entry:
        """What a fill does: ask the origin (50 ms), store the answer."""
        label = f"{id(self)}-{len(self.fills)}"
        self.fills.append(label)
        self.filling.set()
        await asyncio.sleep(0.05)
        if fail:
            raise RuntimeError("the origin failed")
        filled = entry(label, self.store.next_generation())
        await self.store.put(K(key), filled)
        return filled

    async def stored(self, key: str) -> Entry | None:
        return await self.store.get(K(key))

    async def ask(self, key: str, *, fail: bool = False) -> Entry:
        return await self.leases.run(
            key, lambda: self.fill(key, fail=fail), lambda: self.stored(key)
        )


@pytest.fixture
async def pop(redis_url: str, redis: RedisClient) -> AsyncIterator[list[Process]]:
    opened: list[RedisClient] = []

    async def process(wait_s: float = 1.0) -> Process:
        client = await open_client(redis_url)
        opened.append(client)
        leases = FillLeases(client, PREFIX, wait_s=wait_s, clock=time.monotonic)
        return Process(client, RedisEntryStore(client, PREFIX), leases)

    yield [await process() for _ in range(3)]
    for client in opened:
        await client.aclose()


def fills(processes: list[Process]) -> int:
    return sum(len(p.fills) for p in processes)


async def test_one_leader_among_the_processes_and_the_others_serve_its_entry(
    pop: list[Process],
) -> None:
    asked = [p.ask("cold") for p in pop for _ in range(10)]
    got = await asyncio.gather(*asked)
    assert fills(pop) == 1
    leader = next(p for p in pop if p.fills)
    assert {e.model_version for e in got} == {leader.fills[0]}
    counters = [p.leases.counters for p in pop]
    assert sum(c.led for c in counters) == 1
    # A caller that came after the leader released finds the entry stored: no fill either.
    assert sum(c.followed + c.found for c in counters) == 29
    assert sum(c.waited_out + c.unreachable for c in counters) == 0
    # Released: the next fill of the key leads at once.
    assert not await pop[0].leases.held("cold")


async def test_a_leader_that_finds_the_entry_stored_fills_nothing(pop: list[Process]) -> None:
    """Another process stored the entry between this one's miss and its lease."""
    stored = await pop[0].fill("k")
    assert await pop[1].ask("k") == stored
    assert (len(pop[1].fills), pop[1].leases.counters.found) == (0, 1)
    assert not await pop[1].leases.held("k")


async def test_keys_are_leased_apart(pop: list[Process]) -> None:
    got = await asyncio.gather(*(p.ask(key) for p in pop for key in ("a", "b", "c")))
    assert fills(pop) == 3
    assert len({e.model_version for e in got}) == 3


async def test_a_leader_that_fails_leaves_the_key_to_one_follower(pop: list[Process]) -> None:
    leading = asyncio.create_task(pop[0].ask("k", fail=True))
    await pop[0].filling.wait()  # it holds the lease
    followers = [p.ask("k") for p in pop[1:] for _ in range(5)]
    got = await asyncio.gather(*followers)
    with pytest.raises(RuntimeError, match="origin failed"):
        await leading
    assert fills(pop) == 2  # the failed one, and one follower's, which the others served
    assert len({e.model_version for e in got}) == 1


async def test_a_leader_that_dies_leaves_the_key_to_the_next_after_its_lease(
    redis_url: str, pop: list[Process]
) -> None:
    dead = FillLeases(pop[0].redis, PREFIX, wait_s=0.3, clock=time.monotonic)
    assert await dead.acquire("k") is not None  # and never fills nor releases
    started = time.monotonic()
    got = await asyncio.gather(*(p.ask("k") for p in pop for _ in range(3)))
    took = time.monotonic() - started
    assert fills(pop) == 1  # the next leader's, once the dead one's lease expired
    assert len({e.model_version for e in got}) == 1
    assert 0.25 < took < 1.0  # within the followers' wait (1 s)


async def test_followers_fill_for_themselves_after_the_wait(pop: list[Process]) -> None:
    stuck = FillLeases(pop[0].redis, PREFIX, wait_s=10.0, clock=time.monotonic)
    assert await stuck.acquire("k") is not None  # a lease that outlives the wait
    short = [FillLeases(p.redis, PREFIX, wait_s=0.2, clock=time.monotonic) for p in pop]
    for p, leases in zip(pop, short, strict=True):
        p.leases = leases
    started = time.monotonic()
    await asyncio.gather(*(p.ask("k") for p in pop))
    assert 0.2 <= time.monotonic() - started < 1.0
    assert fills(pop) == 3
    assert sum(p.leases.counters.waited_out for p in pop) == 3


async def test_a_release_deletes_only_its_own_lease(pop: list[Process]) -> None:
    leases = pop[0].leases
    token = await leases.acquire("k")
    assert token is not None
    assert await pop[1].leases.acquire("k") is None
    assert await leases.release("k", "not-the-token") is False
    assert await leases.held("k")
    assert await leases.release("k", token) is True
    assert not await leases.held("k")


async def test_an_unreachable_store_fills_here(unused_tcp_port: int) -> None:
    client = connect(f"redis://127.0.0.1:{unused_tcp_port}/0", socket_connect_timeout=0.5)
    leases = FillLeases(client, PREFIX, wait_s=1.0, clock=time.monotonic)

    async def fill() -> str:
        return "filled here"

    async def stored() -> str | None:
        raise AssertionError("nothing to read from a store that is away")

    try:
        assert await leases.run("k", fill, stored) == "filled here"
        assert leases.counters.unreachable == 1
    finally:
        await client.aclose()
