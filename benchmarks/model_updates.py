"""Model updates at the traffic model's interaction rate, for ``benchmarks.edge_hit``'s
realistic mode: while wrk asks the edge for the power users' slates, their models change
as a click of theirs would change them, and each change reaches the edge as the stream
workers send it (a ``UserUpdate`` with the new model, through the real ``SyncPublisher``,
one publish per batch), voiding the user's bank of runs as in production.

Why not the clicks themselves: at the thousands of answers a second an edge serves here,
one stream worker sharing wrk's core cannot keep up with the decision log and the clicks
(measured: a backlog of 2,000 entries and 12 s behind after 10 s, so that most of the
clicks never reached the edge during the run). The workers still run and still consume
the edge's decision log; the updates are what the workers would send once caught up.

The rate follows the edge's own count of answers it ranked (``perso_edge_ranked_here``,
read from its ``/metrics`` every ``POLL_S``): ``share`` updates per answer
(``benchmarks.traffic_model``: a power user's page view is followed by an interaction with
chance 0.6), each for the next user in a fixed order, so that each user's model changes
after about every ``1 / share`` of their requests, as a power user's does. Each update
holds a new model (its mean moved, its variance a little smaller, as after a click) and a
version above any the user had before (nanoseconds since the epoch).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from redis.asyncio import Redis
from redis.exceptions import RedisError

from relevance.user_model import UserModel, model_bytes
from sync.exceptions import PublishFailed
from sync.messages import UserUpdate
from sync.publisher import SyncPublisher

# A power user's page view is followed by an interaction with this chance
# (``loadtests.traffic``'s model, ``benchmarks.traffic_model``).
POWER_INTERACTION_SHARE = 0.6
# How often the owed updates go out: a stream worker's batch interval.
POLL_S = 0.1
# Versions: nanoseconds since the epoch, above any version the origin gives a user (a
# count of updates, or milliseconds) and above those of an earlier driver of the same run
# (an update below the version an edge holds is ignored, rightly).


@dataclass
class Sent:
    updates: int = 0
    failed: int = 0  # updates in a publish that failed (not retried)
    answers: int = 0  # the edge's ranked answers counted while the driver ran


class ModelUpdates:
    """Model updates of ``users`` (dimension ``dim``), ``share`` per answer the edge
    ranked, published to ``regions`` through the Redis at ``redis_url`` in a thread of its
    own between ``start`` and ``stop``."""

    def __init__(
        self,
        *,
        redis_url: str,
        regions: Sequence[str],
        users: Sequence[str],
        dim: int,
        prior_scale: float,
        ranked: Callable[[], int],
        share: float = POWER_INTERACTION_SHARE,
        seed: int = 1,
    ) -> None:
        if not users:
            raise ValueError("model updates need users")
        self._redis_url = redis_url
        self._regions = tuple(regions)
        self._users = itertools.cycle(users)
        self._dim = dim
        self._prior_var = prior_scale / dim
        self._ranked = ranked
        self._share = share
        self._rng = np.random.default_rng(seed)
        self._version = 0
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.sent = Sent()

    def start(self) -> None:
        self._stopping.clear()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    def stop(self) -> Sent:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        return self.sent

    def model(self) -> UserModel:
        """A model as after a few clicks: its mean off the prior's, its variance below."""
        mean = self._rng.normal(0.0, np.sqrt(self._prior_var), self._dim)
        var = np.full(self._dim, self._prior_var * 0.9)
        return UserModel(mean.astype(np.float32), var.astype(np.float32))

    async def _run(self) -> None:
        redis = Redis.from_url(self._redis_url)
        publisher = SyncPublisher(redis, self._regions, time.time)
        try:
            start = await asyncio.to_thread(self._ranked)
            owed = 0.0
            while not self._stopping.is_set():
                await asyncio.sleep(POLL_S)
                counted = await asyncio.to_thread(self._ranked) - start
                owed += self._share * (counted - self.sent.answers)
                self.sent.answers = counted
                batch = []
                while owed >= 1.0:
                    owed -= 1.0
                    self._version = max(self._version + 1, time.time_ns())
                    batch.append(
                        UserUpdate(
                            next(self._users), self._version, model=model_bytes(self.model())
                        )
                    )
                if batch:
                    await self._publish(publisher, batch)
        finally:
            await redis.aclose()

    async def _publish(self, publisher: SyncPublisher, batch: list[UserUpdate]) -> None:
        try:
            await publisher.publish(batch)
        except (PublishFailed, RedisError):  # counted: the run goes on with the next batch
            self.sent.failed += len(batch)
        else:
            self.sent.updates += len(batch)
