"""Who calls the origin's service routes: one identity per edge (or other part), each with a
token of its own, revocable one at a time without touching the others.

``PERSO_SERVICE_TOKENS`` names them, ``name=token`` comma-separated (``parse_service_tokens``);
``PERSO_ORIGIN_TOKEN``, the one token every edge shared before, stays valid as the identity
``shared`` while it is set, so that a deployment moves its edges to tokens of their own one
at a time. A token is found by comparing it with every configured one in constant time.

Revocation is shared by every origin through Redis: ``revoke`` adds the name to one set
(``protocol.keys.SERVICE_REVOKED``), ``restore`` removes it, and each origin reads the set
every ``POLL_S`` (``follow``): a revoked edge is refused (401) by every origin within about
a second, by the one that revoked it at once. While the set cannot be read, the last one
read holds. Rotating an edge's token keeps its name: its new token added beside the old
(``name=old,name=new``: both valid), the edge restarted with the new one
(``PERSO_EDGE_SERVICE_TOKEN``), then the old one removed; no request is refused meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from redis.exceptions import RedisError

from protocol import keys
from protocol.service_tokens import SHARED
from redis_client.client import RedisClient

log = logging.getLogger(__name__)

POLL_S = 0.5


@dataclass
class ServiceIdentities:
    """The identities an origin accepts on its service routes, and which are revoked."""

    tokens: Sequence[tuple[str, str]]
    revoked: frozenset[str] = frozenset()
    read_failures: int = field(default=0)

    @property
    def open(self) -> bool:
        """No token configured at all: the service routes are open (a development set-up)."""
        return not self.tokens

    def identify(self, presented: str | None) -> str | None:
        """The identity ``presented`` is the token of (revoked or not); None for none."""
        if presented is None:
            return None
        found = None
        for name, token in self.tokens:
            # every token compared, in constant time each: the time says nothing of which
            if hmac.compare_digest(presented.encode(), token.encode()):
                found = name
        return found

    def names(self) -> list[str]:
        return list(dict.fromkeys(name for name, _ in self.tokens))

    async def revoke(self, redis: RedisClient, name: str) -> None:
        await redis.sadd(keys.SERVICE_REVOKED, name)
        self.revoked = self.revoked | {name}

    async def restore(self, redis: RedisClient, name: str) -> None:
        await redis.srem(keys.SERVICE_REVOKED, name)
        self.revoked = self.revoked - {name}

    async def refresh(self, redis: RedisClient) -> None:
        """The revoked names as Redis holds them now; the last ones read while it cannot."""
        try:
            members = await redis.smembers(keys.SERVICE_REVOKED)
        except RedisError as exc:
            self.read_failures += 1
            log.warning("revoked service identities not read, the last ones hold: %r", exc)
            return
        self.revoked = frozenset(m.decode() if isinstance(m, bytes) else str(m) for m in members)

    async def follow(self, redis: RedisClient, stop: asyncio.Event) -> None:
        """``refresh`` every ``POLL_S`` until ``stop``."""
        while not stop.is_set():
            await self.refresh(redis)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=POLL_S)


def identities_of(shared: str | None, named: Sequence[tuple[str, str]]) -> ServiceIdentities:
    """``PERSO_ORIGIN_TOKEN`` (as ``shared``) and ``PERSO_SERVICE_TOKENS``."""
    tokens = [(SHARED, shared)] if shared else []
    return ServiceIdentities([*tokens, *named])
