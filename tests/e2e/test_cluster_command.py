"""``perso cluster up|down``: a Redis Cluster on loopback as real processes, started in the
foreground and stopped from another shell."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import redis as redis_sync
from redis.cluster import ClusterNode, RedisCluster

from perso.redis_cluster import CLUSTER_SCHEME
from tests.e2e.conftest import perso_env

pytestmark = pytest.mark.e2e


def test_a_cluster_starts_answers_and_stops_from_another_command(tmp_path: Path) -> None:
    env = perso_env(tmp_path)
    up = subprocess.Popen(
        [sys.executable, "-m", "perso", "cluster", "up"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert up.stdout is not None
        line = up.stdout.readline().strip()
        assert line.startswith(f"REDIS_URL={CLUSTER_SCHEME}"), line
        addresses = line.removeprefix(f"REDIS_URL={CLUSTER_SCHEME}").split(",")
        assert len(addresses) == 6
        assert (tmp_path / "cluster.json").is_file()
        client = RedisCluster(startup_nodes=[ClusterNode(*a.split(":")) for a in addresses])
        try:
            for n in range(20):  # keys in many slots, one client
                client.set(f"k{{{n}}}", n)
            assert [int(client.get(f"k{{{n}}}") or -1) for n in range(20)] == list(range(20))
        finally:
            client.close()
        down = subprocess.run(
            [sys.executable, "-m", "perso", "cluster", "down"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert down.returncode == 0, down.stdout + down.stderr
        assert up.wait(timeout=30) == 0
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        if up.stdout is not None:
            up.stdout.close()
    assert not (tmp_path / "cluster.json").exists()
    host, port = addresses[0].split(":")
    with pytest.raises(redis_sync.ConnectionError):
        redis_sync.Redis(host=host, port=int(port), socket_connect_timeout=0.5).ping()


def test_down_without_a_cluster_says_so(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "perso", "cluster", "down"],
        env=perso_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0
    assert "no cluster running" in done.stdout
