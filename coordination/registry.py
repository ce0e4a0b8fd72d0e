"""Which edge and origin processes exist, in any deployment: each registers itself in one
Redis hash (``keys.process_registry``) and rewrites its entry every ``BEAT_S`` (a
heartbeat), saying what it is (``kind``, ``region``) and where its ``/metrics`` can be
scraped (``url``). The origins' operations page (``origin.http.ops``) reads it.

An entry whose heartbeat stopped stays ``REGISTRY_FORGET_S`` (the page shows it
unreachable, with its age); after that the reader removes it. A process that stops
cleanly removes its own entry at once. Registering never stops a process: Redis down, the
beat is tried again at the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Literal

from redis.exceptions import RedisError

from protocol import keys
from redis_client.client import RedisClient

log = logging.getLogger(__name__)

Kind = Literal["edge", "origin"]
KINDS: tuple[Kind, ...] = ("edge", "origin")
# How often a process rewrites its entry; the page calls one unreachable after
# ``SILENT_S`` without a beat (a few missed beats, not one slow one).
BEAT_S = 2.0
SILENT_S = 10.0


@dataclass(frozen=True, slots=True)
class Registered:
    """One process's entry, its hash field its ``url`` (unique to the process); ``name``
    for people (``PERSO_EDGE_NAME``, else ``edge-<region>``; ``origin``); ``seen_ms``
    its last beat."""

    name: str
    kind: Kind
    region: str
    url: str
    seen_ms: int

    def encode(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def decode(cls, raw: bytes | str) -> Registered | None:
        """The entry, None when it cannot be read (written by another release)."""
        try:
            fields = json.loads(raw)
            kind = fields["kind"]
            if kind not in KINDS:
                return None
            return cls(
                str(fields["name"]),
                kind,
                str(fields["region"]),
                str(fields["url"]),
                int(fields["seen_ms"]),
            )
        except (ValueError, KeyError, TypeError):
            return None


def current(
    raw: Mapping[bytes | str, bytes | str], now_ms: int
) -> tuple[list[Registered], list[str]]:
    """The entries of the registry's hash worth keeping, and the fields (URLs) to forget:
    unreadable, or silent for ``REGISTRY_FORGET_S``."""
    kept: list[Registered] = []
    forget: list[str] = []
    for field, value in raw.items():
        name = field.decode() if isinstance(field, bytes) else field
        entry = Registered.decode(value)
        if entry is None or now_ms - entry.seen_ms > keys.REGISTRY_FORGET_S * 1000:
            forget.append(name)
        else:
            kept.append(entry)
    return sorted(kept, key=lambda e: (e.kind, e.region, e.name, e.url)), forget


async def registered(redis: RedisClient, now_ms: int) -> list[Registered]:
    """Every process registered now (removing those long gone)."""
    key = keys.process_registry()
    entries, forget = current(await redis.hgetall(key), now_ms)
    if forget:
        await redis.hdel(key, *forget)
    return entries


class Registration:
    """This process's entry, rewritten every ``BEAT_S`` by ``run`` until told to stop."""

    def __init__(
        self,
        redis: RedisClient,
        *,
        name: str,
        kind: Kind,
        region: str,
        url: str,
        clock: Callable[[], float],
    ) -> None:
        self._redis = redis
        self._entry = Registered(name, kind, region, url, 0)
        self._clock = clock

    @property
    def url(self) -> str:
        return self._entry.url

    async def beat(self) -> None:
        entry = Registered(
            self._entry.name,
            self._entry.kind,
            self._entry.region,
            self._entry.url,
            int(self._clock() * 1000),
        )
        await self._redis.hset(keys.process_registry(), entry.url, entry.encode())

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.beat()
            except (RedisError, OSError) as exc:
                log.warning("registration of %s not written: %s", self.url, exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), BEAT_S)
        # A clean stop: gone from the page at once, rather than "unreachable".
        with contextlib.suppress(RedisError, OSError):
            await self._redis.hdel(keys.process_registry(), self.url)
