"""Where the operations page's scraper may go (``PERSO_OPS_SCRAPE_NETWORKS``): pure
functions over URLs and addresses, read by the settings (validation) and the scraper.

The scraper (``origin.http.ops_scrape``) fetches ``/metrics`` from every URL the process
registry in Redis names (``coordination.registry``). Whoever can write that Redis could
name any address, and have the origin send requests there from inside the network: a
cloud's metadata service (169.254.169.254), an admin port on another host. So a
registered URL is scraped only when its host is an address in the allowed networks, or a
name all of whose addresses are; others are shown unreachable with the reason, never
fetched. Default: loopback and the private ranges, where a deployment's own processes
are; the link-local range (metadata services) is in neither.

A name is resolved when scraped and the connection then made by name, so a DNS answer
that changes in between (rebinding) is not caught: deployments that register by name and
distrust their DNS list IP networks of their processes only and register by address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_NETWORKS = (
    "127.0.0.0/8",
    "::1/128",
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "fc00::/7",
)


def parse_networks(parts: Iterable[str]) -> tuple[Network, ...]:
    """Each part as a network (``10.0.0.0/8``, ``::1/128``, a single address);
    ``ValueError`` naming the first that is not one."""
    out: list[Network] = []
    for part in parts:
        try:
            out.append(ipaddress.ip_network(part.strip(), strict=False))
        except ValueError as exc:
            raise ValueError(f"not an IP network: {part!r} ({exc})") from None
    return tuple(out)


def host_of(url: str) -> str | None:
    """The host of an http(s) URL without credentials (None: not one the scraper takes)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or parts.username or parts.password:
        return None
    return parts.hostname or None


def literal_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``host`` as an IP address when it is one."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def refusal(addresses: Sequence[str], networks: Sequence[Network]) -> str | None:
    """Why a host with ``addresses`` (what it is, or resolves to) must not be scraped;
    None when every one of them is in ``networks``."""
    if not addresses:
        return "no address"
    for text in addresses:
        address = ipaddress.ip_address(text.split("%", 1)[0])  # an IPv6 zone dropped
        mapped = getattr(address, "ipv4_mapped", None)
        if mapped is not None:
            address = mapped
        if not any(address in network for network in networks):
            return f"{address} is outside PERSO_OPS_SCRAPE_NETWORKS"
    return None
