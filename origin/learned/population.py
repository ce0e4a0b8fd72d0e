"""The population prior of the users' models (``relevance.population``) as stored: one key,
``keys.POPULATION_PRIOR``, its bytes (``relevance.population.population_bytes``), written by
the elected worker when it re-estimates it (``origin.worker.population``), read by every
worker (which updates its users under it) and origin (which ranks under it and carries it
to the edges in its pools), each at most every ``REFRESH_S``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from redis.exceptions import RedisError

from protocol import keys
from protocol.exceptions import MalformedMessage
from redis_client.client import RedisClient
from relevance.population import Population, population_bytes, population_from_bytes

log = logging.getLogger(__name__)

# How often a reader reads the prior again, seconds.
REFRESH_S = 2.0


class PopulationStore:
    """The prior in Redis: read (``current``: at most every ``refresh_s``) and written."""

    def __init__(
        self, redis: RedisClient, clock: Callable[[], float], refresh_s: float = REFRESH_S
    ) -> None:
        self._redis = redis
        self._clock = clock
        self._refresh_s = refresh_s
        self._held: Population | None = None
        self._read_at = -float("inf")
        self.unreadable = 0

    async def read(self) -> Population | None:
        """The stored prior; None when there is none, or it cannot be read (logged)."""
        raw = await self._redis.get(keys.POPULATION_PRIOR)
        if raw is None:
            return None
        try:
            return population_from_bytes(raw if isinstance(raw, bytes) else raw.encode())
        except MalformedMessage as exc:
            self.unreadable += 1
            log.warning("population prior unreadable, the configured prior stands: %s", exc)
            return None

    async def current(self) -> Population | None:
        """The prior read at most ``refresh_s`` ago; the one held when Redis fails."""
        now = self._clock()
        if now - self._read_at >= self._refresh_s:
            try:
                self._held = await self.read()
                self._read_at = now
            except RedisError as exc:
                log.warning("population prior not read, the one held stands: %r", exc)
        return self._held

    async def write(self, population: Population) -> None:
        await self._redis.set(keys.POPULATION_PRIOR, population_bytes(population))
        self._held, self._read_at = population, self._clock()
