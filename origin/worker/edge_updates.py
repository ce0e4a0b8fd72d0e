"""The stream workers' publish hook toward the edges: every batch's updated users, as
``UserUpdate`` sync messages carrying each user's new model to every region (one publish
per batch: one script, one round trip).

An edge drops the entries it filled for that user alone (power and active users; segment
entries hold nobody's data and stay), so the user's next request is ranked from the
embedding the worker just wrote rather than living out the settle window
(``invalidation.ttl``). Best effort: the embedding is written already; a failed publish is
counted and logged, and the settle window and TTLs still bound what an edge shows.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from origin.worker.batch import Published
from relevance.user_model import model_bytes
from sync.exceptions import PublishFailed
from sync.messages import UserUpdate
from sync.publisher import SyncPublisher

log = logging.getLogger(__name__)


class EdgeUpdates:
    def __init__(self, publisher: SyncPublisher) -> None:
        self._publisher = publisher
        self.published = 0
        self.failed = 0

    async def publish(self, updates: Sequence[Published]) -> None:
        if not updates:
            return
        messages = [
            UserUpdate(user_id, version, model=model_bytes(model))
            for user_id, version, model in updates
        ]
        try:
            await self._publisher.publish(messages)
        except PublishFailed as exc:
            self.failed += len(messages)
            log.warning("%d user updates not published to the edges: %s", len(messages), exc)
            return
        self.published += len(messages)


def in_turn(
    *hooks: Callable[[list[Published]], Awaitable[None]],
) -> Callable[[list[Published]], Awaitable[None]]:
    """One ``on_batch`` hook that calls each of ``hooks`` in turn."""

    async def run(updates: list[Published]) -> None:
        for hook in hooks:
            await hook(updates)

    return run
