"""Where a load test sends traffic, and which edge each simulated browser talks to.

The targets come from the stack file ``perso up`` writes (``edge_urls``: every edge
process of each region, when present; else ``edges``: one per region) or, for a remote
deployment, from the runner's options. Either way they are checked once here: region names
as the settings allow them, absolute http(s) URLs, an origin and an API key for user
tokens. Addresses off the loopback interface are reported so the runner can refuse them
unless it was told the deployment is remote: a typo must not load somebody's production.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from config.validation import REGION_NAME
from loadtests.exceptions import TargetsError


@dataclass(frozen=True, slots=True)
class Targets:
    """Every edge URL of each region, the origin that issues user tokens, its API key."""

    edges: Mapping[str, tuple[str, ...]]
    origin_url: str
    api_key: str

    @property
    def regions(self) -> list[str]:
        return list(self.edges)

    def urls(self) -> list[str]:
        """Every address the load test may send a request to."""
        return [self.origin_url, *(url for urls in self.edges.values() for url in urls)]

    def not_loopback(self) -> list[str]:
        return [url for url in self.urls() if not is_loopback(urlsplit(url).hostname or "")]

    def to_json(self) -> dict[str, Any]:
        """The stack file's shape, so the Locust file reads a runner's targets like a stack."""
        return {
            "edge_urls": {region: list(urls) for region, urls in self.edges.items()},
            "edges": {region: urls[0] for region, urls in self.edges.items()},
            "origin_url": self.origin_url,
            "api_key": self.api_key,
        }


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str, what: str) -> str:
    """``url`` without a trailing slash, or ``TargetsError`` naming ``what`` and the fault."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TargetsError(f"{what}: {url!r} is not an http(s) URL with a host")
    if parts.query or parts.fragment:
        raise TargetsError(f"{what}: {url!r} has a query or fragment; give the base URL")
    return url.strip().rstrip("/")


def make_targets(
    edges: Mapping[str, Sequence[str]], origin_url: str, api_key: str, *, source: str
) -> Targets:
    """Checked targets; ``source`` (a file, or the options) prefixes every complaint."""
    if not edges:
        raise TargetsError(f"{source}: no edges")
    checked: dict[str, tuple[str, ...]] = {}
    seen: set[str] = set()
    for region, urls in edges.items():
        if not REGION_NAME.fullmatch(region):
            raise TargetsError(f"{source}: region {region!r} is not 1-64 of A-Z a-z 0-9 _ -")
        if not urls:
            raise TargetsError(f"{source}: region {region} has no edge URL")
        clean = tuple(check_url(url, f"{source}: edge of {region}") for url in urls)
        for url in clean:
            if url in seen:
                raise TargetsError(f"{source}: edge {url} is listed twice")
            seen.add(url)
        checked[region] = clean
    if not api_key:
        raise TargetsError(f"{source}: no API key (for POST /v1/auth/token)")
    return Targets(checked, check_url(origin_url, f"{source}: origin"), api_key)


def from_stack(data: Mapping[str, Any], source: str) -> Targets:
    """Targets of a stack file's contents: ``edge_urls`` when present, else ``edges``."""
    edge_urls = data.get("edge_urls")
    if edge_urls:
        edges = {str(region): [str(url) for url in urls] for region, urls in edge_urls.items()}
    elif data.get("edges"):
        edges = {str(region): [str(url)] for region, url in data["edges"].items()}
    else:
        raise TargetsError(f"{source}: neither 'edge_urls' nor 'edges'")
    for key in ("origin_url", "api_key"):
        if not data.get(key):
            raise TargetsError(f"{source}: no {key!r}")
    return make_targets(edges, str(data["origin_url"]), str(data["api_key"]), source=source)


def read_stack(path: Path) -> Targets:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise TargetsError(f"{path} not found: start the stack with `perso up` first") from exc
    except (OSError, ValueError) as exc:
        raise TargetsError(f"{path}: not a readable JSON stack file ({exc})") from exc
    if not isinstance(data, dict):
        raise TargetsError(f"{path}: not a JSON object")
    return from_stack(data, str(path))


def parse_edges(values: Sequence[str]) -> dict[str, list[str]]:
    """``["us-east=http://a:1,http://a:2", "eu-west=http://b:1"]`` -> region -> URLs."""
    edges: dict[str, list[str]] = {}
    for value in values:
        region, sep, urls = value.partition("=")
        region = region.strip()
        if not sep or not region or not urls.strip():
            raise TargetsError(f"--edges {value!r}: expected REGION=URL[,URL...]")
        if region in edges:
            raise TargetsError(f"--edges: region {region} given twice")
        edges[region] = [url for url in (u.strip() for u in urls.split(",")) if url]
    return edges


def route(targets: Targets, only_region: str | None, user_number: int) -> tuple[str, str]:
    """The region and edge URL of a Locust process's ``user_number``-th simulated browser.

    A worker of one region (``only_region``) puts all its users there; a process without
    one spreads them over the regions in turn. Within a region, users take its edge
    processes in turn, so they spread evenly and each keeps its connection to one.
    """
    if only_region:
        if only_region not in targets.edges:
            raise TargetsError(f"region {only_region} is not one of {', '.join(targets.edges)}")
        region = only_region
        nth = user_number
    else:
        regions = targets.regions
        region = regions[user_number % len(regions)]
        nth = user_number // len(regions)
    urls = targets.edges[region]
    return region, urls[nth % len(urls)]
