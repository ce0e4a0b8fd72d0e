"""The population prior of the users' models (``relevance.population``) as the workers keep
it: every worker updates its users under the current prior, read from Redis
(``origin.learned.population``), and keeps a sample of the users it
updated lately (their models as learnt, the most recent ``SAMPLE_USERS``); the elected
worker (the one that trims the logs: one election for the workers' singleton jobs)
re-estimates the prior from its sample every ``PERSO_POPULATION_EVERY_S``, starting from the
current one, with ``PERSO_POPULATION_RANK`` co-varying directions, and writes it with the
next version. An estimate with a rank costs about 25 ms per EM pass per 500 users of the
sample (5,000 users: 0.25 s a pass, measured on this project's 2-core machine): it runs in a
thread, off the worker's loop, and from a stored prior of its rank it takes
``WARM_ITERATIONS`` passes (EM goes on from where the last estimate left it). Origins read
it for their rankings and carry it to the edges in the pools they fill.

A worker's sample is the users of its partitions: with several workers the elected one
estimates from its share of the users, a sample of all of them.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace

from origin.learned.population import PopulationStore
from origin.worker.batch import Published
from relevance.population import EM_ITERATIONS, Population, estimate
from relevance.user_model import UserModel

# Users a worker's sample keeps at most (their learnt models: 512 bytes each at dim 128).
SAMPLE_USERS = 5_000
# EM's passes for an estimate with a rank that starts from a stored prior of that rank.
WARM_ITERATIONS = 3


class PopulationSample:
    """The learnt models of the users a worker updated lately, the newest ``max_users``."""

    def __init__(self, max_users: int = SAMPLE_USERS) -> None:
        self._max = max_users
        self._models: OrderedDict[str, UserModel] = OrderedDict()

    def __len__(self) -> int:
        return len(self._models)

    def observe(self, published: Sequence[Published]) -> None:
        for user_id, _, model in published:
            self._models[user_id] = model
            self._models.move_to_end(user_id)
        while len(self._models) > self._max:
            self._models.popitem(last=False)

    def models(self, dim: int) -> list[UserModel]:
        return [m for m in self._models.values() if m.dim == dim]


async def reestimate(
    store: PopulationStore,
    sample: PopulationSample,
    *,
    dim: int,
    learnt_var: float,
    rank: int = 0,
) -> Population | None:
    """The prior of ``rank`` estimated from ``sample``, from the stored one, written with
    the next version; None when the sample is too small (the stored prior stands)."""
    current = await store.read()
    start = current if current is not None and current.dim == dim else None
    models = sample.models(dim)
    warm = rank > 0 and start is not None and start.rank == rank
    got = await asyncio.to_thread(
        estimate,
        models,
        learnt_var,
        start,
        rank=rank,
        iterations=WARM_ITERATIONS if warm else EM_ITERATIONS,
    )
    if got is None:
        return None
    population = replace(got, version=current.version + 1 if current is not None else 1)
    await store.write(population)
    return population
