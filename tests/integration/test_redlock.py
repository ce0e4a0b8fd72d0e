"""``coordination.Redlock`` over three real Redis servers: the lock contract
(``tests.integration.lock_contract``) and what only a quorum lock promises, with nodes
stopped, hung, restarted without their data, or holding the key for someone else.

The three servers live for the module; a test that stops one leaves it stopped and the next
test's ``nodes`` fixture starts it again, empty, on the same port. The lock's clock is the
real monotonic clock: it times each grant against the TTL that Redis counts for real.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from coordination.exceptions import LockNotAcquired, QuorumUnreachable
from coordination.lock import NO_RETRY, RetryPolicy
from coordination.redlock import Redlock
from perso.redis_server import RedisServer
from protocol import keys
from tests.integration.lock_contract import LockContract

NODE_TIMEOUT_S = 0.05


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RedisServer]]:
    started: list[RedisServer] = []
    try:
        for name in "abc":
            started.append(
                RedisServer(tmp_path_factory.mktemp(f"redlock-{name}"), persistent=False)
            )
            started[-1].start()
        yield started
    finally:
        for server in started:
            server.stop()


def _client(server: RedisServer) -> Redis:
    # No client retries: a stopped node must fail its vote at once.
    return Redis(host=server.host, port=server.port or 0, retry=Retry(NoBackoff(), 0))


@pytest.fixture
async def nodes(servers: list[RedisServer]) -> AsyncIterator[list[Redis]]:
    """One client per node, every node running and empty."""
    clients = []
    for server in servers:
        server.start()  # again, on its port, if a previous test stopped it
        clients.append(_client(server))
    await asyncio.gather(*(client.flushall() for client in clients))
    yield clients
    await asyncio.gather(*(client.aclose() for client in clients))


@pytest.fixture
def lock(nodes: list[Redis]) -> Redlock:
    return Redlock(
        nodes, time.monotonic, rng=random.Random(7).random, node_timeout_s=NODE_TIMEOUT_S
    )


class TestRedlockContract(LockContract):
    # The token is the largest of the granting majority's counters: increasing, not
    # consecutive; and the lock times grants with the real monotonic clock.
    consecutive_fencing = False
    injected_clock = False


async def _holders(nodes: list[Redis], resource: str) -> list[bytes | None]:
    return list(await asyncio.gather(*(node.get(keys.lock(resource)) for node in nodes)))


async def _reconnect(node: Redis) -> None:
    """Drop the connections to a restarted node, so that the next grant's vote is not
    spent on finding them dead (a retry would get past that anyway)."""
    await node.connection_pool.disconnect()


async def _counters(nodes: list[Redis], resource: str) -> list[int]:
    replies = await asyncio.gather(*(node.get(keys.lock_fencing(resource)) for node in nodes))
    return [int(reply or 0) for reply in replies]


async def test_a_grant_is_held_on_every_node(lock: Redlock, nodes: list[Redis]) -> None:
    started = time.monotonic()
    lease = await lock.acquire("r", 5000)
    assert started <= lease.acquired_at <= time.monotonic()
    assert lock.valid_until(lease) == pytest.approx(lease.acquired_at + 4.948)
    assert await _holders(nodes, "r") == [lease.token.encode()] * 3
    assert await _counters(nodes, "r") == [1, 1, 1]
    assert await lock.release(lease)
    assert await _holders(nodes, "r") == [None] * 3


async def test_one_node_down_still_grants_and_releases(
    lock: Redlock, nodes: list[Redis], servers: list[RedisServer]
) -> None:
    servers[2].stop()
    lease = await lock.try_acquire("r", 5000)
    assert lease is not None
    assert await lock.is_locked("r")
    info = await lock.info("r")
    assert info is not None
    assert (info.token, info.fencing) == (lease.token, lease.fencing)
    assert await lock.try_acquire("r", 5000) is None
    assert await lock.extend(lease, 5000)
    assert await lock.release(lease)
    assert not await lock.is_locked("r")
    assert await _holders(nodes[:2], "r") == [None, None]


async def test_two_nodes_down_refuses(
    lock: Redlock, nodes: list[Redis], servers: list[RedisServer]
) -> None:
    servers[1].stop()
    servers[2].stop()
    assert await lock.try_acquire("r", 5000) is None
    with pytest.raises(LockNotAcquired):
        await lock.acquire("r", 5000, retry=NO_RETRY)
    with pytest.raises(LockNotAcquired):
        await lock.acquire("r", 5000, retry=RetryPolicy(3, 0.001, 0.002))
    # The surviving node granted each attempt and was released each time.
    assert await _holders(nodes[:1], "r") == [None]
    assert await _counters(nodes[:1], "r") == [5]
    with pytest.raises(QuorumUnreachable):
        await lock.is_locked("r")
    with pytest.raises(QuorumUnreachable):
        await lock.info("r")


async def test_a_foreign_holder_and_a_down_node_refuse_and_the_partial_grant_is_released(
    lock: Redlock, nodes: list[Redis], servers: list[RedisServer]
) -> None:
    await nodes[0].set(keys.lock("r"), "someone-else", px=5000)
    servers[2].stop()
    assert await lock.try_acquire("r", 5000) is None
    # Node b granted us, then was released; node a still has the other holder.
    assert await _holders(nodes[:2], "r") == [b"someone-else", None]
    assert await _counters(nodes[:2], "r") == [0, 1]
    # Two answers, no majority for anyone: free, as far as a quorum can tell.
    assert await lock.info("r") is None


async def test_a_grant_that_took_longer_than_its_ttl_is_refused_and_released(
    nodes: list[Redis],
) -> None:
    # A clock that moves a whole TTL between two reads: a grant round stalled that long.
    reads = iter([0.0, 0.2])
    lock = Redlock(nodes, lambda: next(reads), node_timeout_s=NODE_TIMEOUT_S)
    assert await lock.try_acquire("r", 200) is None
    assert await _holders(nodes, "r") == [None] * 3
    assert await _counters(nodes, "r") == [1, 1, 1]


async def test_a_hung_node_counts_as_a_failed_vote(lock: Redlock, nodes: list[Redis]) -> None:
    await nodes[0].client_pause(500)  # every command of node a waits half a second
    started = time.monotonic()
    lease = await lock.try_acquire("r", 5000)
    assert lease is not None
    assert time.monotonic() - started < 0.4  # bounded by the per-node timeout, not the pause
    assert lease.fencing == 1
    assert await lock.release(lease)
    await asyncio.sleep(0.6)
    # Whatever the paused node did with the calls that timed out, no majority holds "r".
    assert await _holders(nodes[1:], "r") == [None, None]
    assert not await lock.is_locked("r")
    second = await lock.try_acquire("r", 5000)
    assert second is not None
    assert second.fencing > lease.fencing


async def test_fencing_tokens_increase_across_restarts_without_persistence(
    lock: Redlock, nodes: list[Redis], servers: list[RedisServer]
) -> None:
    """Node c and then node b come back empty (counters at 0). The grant on {a, c} writes
    its token back to c, so the later grant on {b, c} draws above it: with the larger of
    the counters alone it would have drawn 2 after 3."""
    a, b, c = servers
    seen = []
    for _ in range(2):
        lease = await lock.acquire("r", 5000)
        seen.append(lease.fencing)
        assert await lock.release(lease)
    assert await _counters(nodes, "r") == [2, 2, 2]

    c.stop()
    c.start()  # empty: no AOF
    await _reconnect(nodes[2])
    b.stop()
    lease = await lock.acquire("r", 5000)
    assert lease.fencing == 3
    seen.append(lease.fencing)
    assert await _counters([nodes[0], nodes[2]], "r") == [3, 3]  # c lifted from 1
    info = await lock.info("r")
    assert info is not None
    assert info.fencing == 3
    assert await lock.release(lease)

    a.stop()
    b.start()  # empty too
    await _reconnect(nodes[1])
    lease = await lock.acquire("r", 5000)
    seen.append(lease.fencing)
    assert await _counters(nodes[1:], "r") == [4, 4]
    assert await lock.release(lease)
    assert seen == [1, 2, 3, 4]


async def test_release_by_a_non_owner_is_refused(
    lock: Redlock, nodes: list[Redis], servers: list[RedisServer]
) -> None:
    lease = await lock.acquire("r", 5000)
    impostor = dataclasses.replace(lease, token="0" * 32)
    assert not await lock.release(impostor)
    assert await _holders(nodes, "r") == [lease.token.encode()] * 3
    servers[0].stop()
    assert not await lock.release(impostor)
    assert not await lock.extend(impostor, 10_000)
    assert await lock.is_locked("r")
    assert await lock.release(lease)
    assert not await lock.release(lease)


async def test_extend_after_expiry_is_refused(lock: Redlock, nodes: list[Redis]) -> None:
    lease = await lock.acquire("r", 50)
    assert await lock.extend(lease, 50)
    await asyncio.sleep(0.12)
    assert not await lock.extend(lease, 5000)
    assert await _holders(nodes, "r") == [None] * 3
    successor = await lock.acquire("r", 5000)
    assert not await lock.extend(lease, 5000)
    assert await _holders(nodes, "r") == [successor.token.encode()] * 3


async def test_extend_needs_a_majority(
    lock: Redlock, nodes: list[Redis], servers: list[RedisServer]
) -> None:
    lease = await lock.acquire("r", 5000)
    servers[2].stop()
    assert await lock.extend(lease, 6000)
    await nodes[1].delete(keys.lock("r"))  # node b forgot us (a restart, say)
    assert not await lock.extend(lease, 6000)
    assert not await lock.is_locked("r")


def test_a_lock_needs_nodes() -> None:
    with pytest.raises(ValueError, match="node"):
        Redlock([], time.monotonic)
