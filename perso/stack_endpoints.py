"""``stack.json``: the endpoints a running ``perso up`` publishes (``Endpoints``, written
for its owner only), and how the commands that talk to its stack read them: ``perso
workers``, ``evaluate``, ``replay`` and ``catalog load``."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config.settings import ConfigError, Settings


@dataclass(frozen=True)
class Endpoints:
    redis_url: str
    origin_url: str  # the catalog origin: catalog writes, and every tool that takes one URL
    edges: dict[str, str]  # region -> base URL of its first edge process
    data_dir: str
    admin_token: str  # bearer token of the origin's admin API
    origin_token: str  # the service token edges present to the origin
    api_key: str  # a premium API key (``demo``) for POST /v1/auth/token
    # region -> base URL of every edge process of the region (its PoP), the first first
    edge_urls: dict[str, list[str]] = field(default_factory=dict)
    origin_urls: tuple[str, ...] = ()  # every origin, the catalog origin first

    def to_json(self) -> dict[str, Any]:
        return {
            "redis_url": self.redis_url,
            "origin_url": self.origin_url,
            "origin_urls": list(self.origin_urls or (self.origin_url,)),
            "edges": self.edges,
            "edge_urls": self.edge_urls,
            "data_dir": self.data_dir,
            "admin_token": self.admin_token,
            "origin_token": self.origin_token,
            "api_key": self.api_key,
        }


def write_stack_file(path: Path, endpoints: Endpoints) -> None:
    """Publish ``endpoints`` at ``path``."""
    # It holds the admin token: owner-only from the moment it exists. Written under a
    # temporary name and renamed, so a reader waiting for it never sees it half written.
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.unlink(missing_ok=True)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(endpoints.to_json(), indent=2) + "\n")
    os.replace(partial, path)


def read_stack_file(settings: Settings, explicit: Path | None) -> dict[str, object]:
    """The endpoints ``perso up`` published, or nothing when it is not running."""
    stack_file = explicit or settings.data_dir / "stack.json"
    if stack_file.is_file():
        stack: dict[str, object] = json.loads(stack_file.read_text())
        return stack
    if explicit is not None:
        raise ConfigError(f"{stack_file} does not exist (is `perso up` running?)")
    return {}


def stack_redis_url(settings: Settings, explicit: Path | None) -> str:
    """The Redis of REDIS_URL, else the one of ``perso up``'s stack."""
    redis_url = settings.redis_url or str(
        read_stack_file(settings, explicit).get("redis_url") or ""
    )
    if not redis_url:
        raise ConfigError("no Redis: set REDIS_URL, or start `perso up` (it writes stack.json)")
    return redis_url
