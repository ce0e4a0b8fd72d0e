"""A stream worker's part in the population prior (``origin.worker.population``): the prior
it updates its users under, read at every upkeep; the sample of the users it updated
lately; and, for the elected worker, the prior re-estimated from that sample every
``every_s`` (0: never).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from origin.learned.population import PopulationStore
from origin.worker.batch import Published
from origin.worker.population import PopulationSample, reestimate
from redis_client.client import RedisClient
from relevance.population import Population


class PopulationUpkeep:
    """The population prior as one worker keeps it."""

    def __init__(
        self,
        redis: RedisClient,
        clock: Callable[[], float],
        *,
        dim: int,
        learnt_var: float,
        every_s: float,
        rank: int,
    ) -> None:
        self._store = PopulationStore(redis, clock)
        self._clock = clock
        self._sample = PopulationSample()
        self._dim = dim
        self.learnt_var = learnt_var
        self._every_s = every_s
        self._rank = rank
        self._due = 0.0

    def observing(
        self, then: Callable[[list[Published]], Awaitable[None]] | None
    ) -> Callable[[list[Published]], Awaitable[None]]:
        """A worker's hook on each written batch: the users it updated into the sample,
        then ``then`` (if any) called with them."""

        async def published(updates: list[Published]) -> None:
            self._sample.observe(updates)
            if then is not None:
                await then(updates)

        return published

    async def current(self) -> Population | None:
        """The prior to update users under now (``PopulationStore.current``)."""
        return await self._store.current()

    async def reestimate(self) -> Population | None:
        """The elected worker's re-estimate of the population prior, when it is due; None
        when it is not, or the sample is too small."""
        now = self._clock()
        if self._every_s <= 0 or now < self._due:
            return None
        self._due = now + self._every_s
        return await reestimate(
            self._store,
            self._sample,
            dim=self._dim,
            learnt_var=self.learnt_var,
            rank=self._rank,
        )
