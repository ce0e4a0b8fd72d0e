from __future__ import annotations

import pytest

from redis_client.address import AddressError, ClusterAddress, NodeAddress, is_cluster, parse


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:6379/0", NodeAddress("redis://127.0.0.1:6379/0")),
        ("rediss://:secret@cache.example:6380", NodeAddress("rediss://:secret@cache.example:6380")),
        ("unix:///run/redis.sock", NodeAddress("unix:///run/redis.sock")),
        (
            "redis-cluster://127.0.0.1:7000,127.0.0.1:7001",
            ClusterAddress((("127.0.0.1", 7000), ("127.0.0.1", 7001))),
        ),
        ("redis-cluster://h1:7000/", ClusterAddress((("h1", 7000),))),
        (
            "redis-cluster://app:p%40ss@h1:7000, h2:7001",
            ClusterAddress((("h1", 7000), ("h2", 7001)), username="app", password="p@ss"),
        ),
        (
            "rediss-cluster://:secret@h1:7000",
            ClusterAddress((("h1", 7000),), password="secret", tls=True),
        ),
        ("redis-cluster://[::1]:7000", ClusterAddress((("::1", 7000),))),
    ],
)
def test_parse(url: str, expected: object) -> None:
    assert parse(url) == expected


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("127.0.0.1:6379", "not a URL"),
        ("mongodb://h1:27017", "unknown scheme 'mongodb'"),
        ("redis-cluster://", "at least one node"),
        ("redis-cluster://h1", "expected host:port"),
        ("redis-cluster://h1:7000,h2", "'h2': expected host:port"),
        ("redis-cluster://h1:99999", "'h1:99999': the port is not a number"),
        ("redis-cluster://h1:7000/1", "no path"),
        ("redis-cluster://h1:7000?read_from_replicas=1", "no options"),
    ],
)
def test_what_names_neither_says_why(url: str, reason: str) -> None:
    with pytest.raises(AddressError) as raised:
        parse(url)
    assert reason in str(raised.value)


@pytest.mark.parametrize(
    ("url", "cluster"),
    [
        ("redis://h:1", False),
        ("redis-cluster://h:1,h:2", True),
        ("rediss-cluster://h:1", True),
        ("unix:///s", False),
    ],
)
def test_is_cluster(url: str, cluster: bool) -> None:
    assert is_cluster(url) is cluster
