"""The project's own Redis Cluster (``perso.redis_cluster``, issue 20): three primaries and
their replicas from the embedded ``redis-server``, every slot covered; the key schema's
partitions spread over the primaries; a primary killed, its replica promoted by the cluster,
and what was acknowledged with ``WAIT`` (it reached the replica) still there."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.cluster import key_slot
from redis.exceptions import RedisError

from perso.redis_cluster import CLUSTER_SCHEME
from perso.redis_cluster import RedisCluster as Cluster
from protocol import keys
from redis_client.client import open_client


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(Path(tmp_path_factory.mktemp("cluster"))) as running:
        yield running


@pytest.fixture
async def client(cluster: Cluster) -> AsyncIterator[RedisCluster]:
    nodes = [ClusterNode(*address.split(":")) for address in cluster.addresses]
    redis = RedisCluster(startup_nodes=nodes, socket_timeout=2.0)
    try:
        yield redis
    finally:
        await redis.aclose()


def test_every_slot_is_served_by_three_primaries_each_with_a_replica(cluster: Cluster) -> None:
    assert cluster.url.startswith(CLUSTER_SCHEME)
    assert len(cluster.addresses) == 6
    roles = [cluster.role(node) for node in cluster.nodes]
    assert sorted(roles) == ["master"] * 3 + ["slave"] * 3
    info = cluster.info(cluster.nodes[0])
    assert (info["cluster_state"], info["cluster_slots_assigned"]) == ("ok", "16384")


async def test_the_partitions_spread_over_the_primaries(
    cluster: Cluster, client: RedisCluster
) -> None:
    partitions = 8
    streams = keys.events_streams(partitions) + keys.decisions_streams(partitions)
    for stream in streams:
        await client.xadd(stream, {"e": b"x"})
    # A partition's streams share its slot (hash tags): one worker's reads stay on one node.
    for p in range(partitions):
        assert key_slot(keys.events_stream(p).encode()) == key_slot(
            keys.decisions_stream(p).encode()
        )
    holders = {client.get_node_from_key(keys.events_stream(p)).name for p in range(partitions)}
    assert len(holders) >= 2  # not all on one primary
    assert sum([await client.xlen(s) for s in streams]) == len(streams)


async def test_a_killed_primary_is_replaced_by_its_replica_and_waited_writes_survive(
    cluster: Cluster, client: RedisCluster
) -> None:
    key = keys.events_accepted(3)
    await client.set(key, b"acknowledged")
    primary = client.get_node_from_key(key)
    # Acknowledged only once a replica has it (issue 20: feedback is acknowledged so).
    assert await client.execute_command("WAIT", 1, 2000, target_nodes=primary) == 1
    [victim] = [n for n in cluster.nodes if f"{cluster.host}:{n.port}" == primary.name]
    victim.kill()
    for _ in range(100):  # the cluster detects it within node_timeout_ms, then promotes
        survivors = [n for n in cluster.nodes if n.child is not None]
        if (
            all(cluster.info(n).get("cluster_state") == "ok" for n in survivors)
            and len(cluster.primary_nodes()) == 3
            and cluster.settled()  # no node's view gives slots to the dead one any more
        ):
            break
        await asyncio.sleep(0.1)
    assert len(cluster.primary_nodes()) == 3
    assert cluster.settled()  # what the module's next tests start from
    # The client follows the new primary (MOVED), and the write is there.
    value = None
    for _ in range(50):
        try:
            value = await client.get(key)
            break
        except (RedisError, OSError):  # the dead node refuses until the client refreshes
            await asyncio.sleep(0.1)
    assert value == b"acknowledged"


async def test_many_callers_at_once_on_a_fresh_client_all_succeed(cluster: Cluster) -> None:
    """``open_client`` learns the layout first: callers that race a lazily initialising
    client would be sent to any node, draw MOVED by the dozen and make redis-py reset its
    connections under the others."""
    redis = await open_client(cluster.url, socket_timeout=2.0)
    script = redis.register_script("return redis.call('INCR', KEYS[1])")
    failures: list[BaseException] = []

    async def caller(n: int) -> None:
        for k in range(40):
            try:
                await script(keys=[f"{{c{(n + k) % 11}}}:n"], args=[])
            except Exception as exc:  # counted: none may happen
                failures.append(exc)

    try:
        await asyncio.gather(*(caller(n) for n in range(32)))
        assert failures == []
        counts = [int(await redis.get(f"{{c{k}}}:n") or 0) for k in range(11)]
        assert sum(counts) == 32 * 40
    finally:
        await redis.aclose()


async def test_around_a_failover_callers_meet_redis_errors_only(tmp_path: Path) -> None:
    """A primary killed under 24 callers: what they meet until its replica serves is a
    ``RedisError`` (the process's own retry or a 503 handles it), never another exception
    from inside redis-py (``redis_client.connections.ClusterConnection``); then all succeed."""
    with Cluster(tmp_path / "failover") as own:
        redis = await open_client(own.url, socket_timeout=1.0, socket_connect_timeout=1.0)
        met: list[BaseException] = []
        done = 0
        stop = asyncio.Event()

        async def caller(n: int) -> None:
            nonlocal done
            k = 0
            while not stop.is_set():
                k += 1
                try:
                    await redis.incr(f"{{f{(n + k) % 50}}}:n")
                    done += 1
                except Exception as exc:  # sorted below
                    met.append(exc)
                    await asyncio.sleep(0.05)

        callers = [asyncio.create_task(caller(n)) for n in range(24)]
        try:
            await asyncio.sleep(0.5)
            own.primary_nodes()[0].kill()
            for _ in range(100):
                await asyncio.sleep(0.1)
                if len(own.primary_nodes()) == 3:
                    break
            await asyncio.sleep(1.0)
            before = done
            await asyncio.sleep(1.0)
        finally:
            stop.set()
            await asyncio.gather(*callers)
            await redis.aclose()
        assert [e for e in met if not isinstance(e, RedisError)] == []
        assert done > before  # serving again
