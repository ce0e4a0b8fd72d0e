"""The stream workers' user vectors mirrored into Qdrant (the vector sink), in
batches, off the worker's critical path.

Redis holds the embedding the product reads; Qdrant's ``users`` collection is a copy for
vector search over users. A failed upsert (a vector store timeout: retry
with back-off, buffer locally) keeps the latest version of each user in a bounded buffer and is
retried after a growing pause; the worker never waits on Qdrant beyond one upsert.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from origin.catalog.vector_store import VectorStore
from relevance.user_model import UserModel
from resilience.backoff import Backoff

log = logging.getLogger(__name__)

# (user, version, model): the batch's published users (``origin.worker.batch.Published``).
Update = tuple[str, int, UserModel]

MAX_BACKOFF_S = 30.0


class UserVectorSink:
    def __init__(
        self,
        store: VectorStore,
        *,
        clock: Callable[[], float],
        max_buffer: int = 100_000,
    ) -> None:
        self._store = store
        self._clock = clock
        self._max_buffer = max_buffer
        self._buffer: dict[str, tuple[int, npt.NDArray[np.float32]]] = {}
        self._retry_at = 0.0
        self._backoff = Backoff(base_s=0.5, cap_s=MAX_BACKOFF_S)
        self.dropped = 0

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    async def publish(self, updates: Sequence[Update]) -> None:
        """Take a batch's (user, version, model) and upsert what is buffered (each model's
        mean, the user's vector), unless a failure asked to wait."""
        for user_id, version, model in updates:
            held = self._buffer.get(user_id)
            if held is None or held[0] < version:
                self._buffer[user_id] = (version, model.mean)
        while len(self._buffer) > self._max_buffer:  # Redis still has them: only the copy lags
            del self._buffer[next(iter(self._buffer))]
            self.dropped += 1
        if self._clock() < self._retry_at or not self._buffer:
            return
        batch = [(user, version, vector) for user, (version, vector) in self._buffer.items()]
        try:
            await self._store.upsert_users(batch, int(self._clock() * 1000))
        except Exception as exc:  # Qdrant down, timing out or refusing: keep and retry
            pause = self._backoff.next()
            self._retry_at = self._clock() + pause
            log.warning(
                "user vectors not written to Qdrant (%d buffered, retry in %.1fs): %r",
                len(self._buffer),
                pause,
                exc,
            )
            return
        for user, version, _ in batch:
            if self._buffer.get(user, (version + 1,))[0] == version:
                del self._buffer[user]
        self._backoff.reset()
