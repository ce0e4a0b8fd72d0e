"""What a Redis URL names: one node, or the nodes of a Redis Cluster.

A node is any URL redis-py reads (``redis://[[user]:password@]host[:port][/db]``,
``rediss://`` for TLS, ``unix:///path``). A cluster is
``redis-cluster://[[user]:password@]host:port,host:port,...``: its seed nodes (any one
that answers is enough for the client to learn the rest) and the credentials they share;
``rediss-cluster://`` is the same over TLS. A cluster has
one database, 0, so it takes no ``/db``.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

CLUSTER_SCHEMES = ("redis-cluster", "rediss-cluster")
NODE_SCHEMES = ("redis", "rediss", "unix")


class AddressError(ValueError):
    """A Redis URL that names no node and no cluster; says what is wrong with it."""


@dataclass(frozen=True, slots=True)
class NodeAddress:
    """One Redis node, as redis-py's ``from_url`` reads it."""

    url: str


@dataclass(frozen=True, slots=True)
class ClusterAddress:
    """The seed nodes of a Redis Cluster, the credentials they share and options."""

    nodes: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = None
    tls: bool = False


Address = NodeAddress | ClusterAddress


def parse(url: str) -> Address:
    """The node or cluster ``url`` names (``AddressError`` saying why it names neither)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise AddressError(
            f"{url!r} is not a URL: expected redis://host:port or "
            "redis-cluster://host:port,host:port,..."
        )
    if scheme in NODE_SCHEMES:
        return NodeAddress(url)
    if scheme not in CLUSTER_SCHEMES:
        raise AddressError(
            f"unknown scheme {scheme!r}: expected one of "
            + ", ".join(NODE_SCHEMES + CLUSTER_SCHEMES)
        )
    return _cluster(scheme, rest)


def _cluster(scheme: str, rest: str) -> ClusterAddress:
    location, query_sep, _ = rest.partition("?")
    if query_sep:
        raise AddressError("a cluster URL takes no options (?...)")
    if "/" in location.rstrip("/"):
        raise AddressError("a cluster URL takes no path: Redis Cluster has one database")
    location = location.rstrip("/")
    credentials, at, hosts = location.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = credentials.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    nodes = tuple(_host_port(part) for part in hosts.split(",") if part.strip())
    if not nodes:
        raise AddressError("a cluster URL names at least one node: redis-cluster://host:port")
    return ClusterAddress(
        nodes=nodes,
        username=username,
        password=password,
        tls=scheme == "rediss-cluster",
    )


def _host_port(part: str) -> tuple[str, int]:
    split = urlsplit("//" + part.strip())
    try:
        port = split.port
    except ValueError as exc:
        raise AddressError(f"node {part.strip()!r}: the port is not a number in 1-65535") from exc
    if not split.hostname or port is None:
        raise AddressError(f"node {part.strip()!r}: expected host:port")
    return split.hostname, port


def is_cluster(url: str) -> bool:
    """Does ``url`` name a cluster (without checking the rest of it)?"""
    return url.partition("://")[0] in CLUSTER_SCHEMES
