"""What a running ``perso up`` published in ``stack.json``, as the commands that talk to its
stack read it: ``perso workers``, ``evaluate``, ``replay`` and ``catalog load``."""

from __future__ import annotations

import json
from pathlib import Path

from config.settings import ConfigError, Settings


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
