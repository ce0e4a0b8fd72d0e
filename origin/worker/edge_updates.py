"""The stream workers' publish hook toward the edges: every batch's updated users, as
``UserUpdate`` sync messages carrying each user's new model and their stated preferences
(read in one round trip per batch, with their version) to every region (one publish per
batch: one script, one round trip). An edge that has both ranks the user with no origin
call; when the preferences cannot be read, the models go without them (the edge asks the
origin for a user whose preferences it does not know).

An edge drops the entries it filled for that user alone (power and active users; segment
entries hold nobody's data and stay), so the user's next request is ranked from the
embedding the worker just wrote rather than living out the settle window
(``invalidation.ttl``). Best effort: the embedding is written already; a failed publish is
counted and logged, and the settle window and TTLs still bound what an edge shows.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence

from redis.exceptions import RedisError

from origin.worker.batch import Published
from protocol.user_model_wire import encode_preferences
from relevance.user_model import model_bytes
from sync.exceptions import PublishFailed
from sync.messages import UserUpdate
from sync.publisher import SyncPublisher

log = logging.getLogger(__name__)


# Users -> (their stated preferences, the preferences' version).
PreferenceReader = Callable[
    [Sequence[str]], Awaitable[Mapping[str, tuple[Mapping[str, float], int]]]
]


class EdgeUpdates:
    def __init__(
        self, publisher: SyncPublisher, preferences: PreferenceReader | None = None
    ) -> None:
        self._publisher = publisher
        self._preferences = preferences
        self.published = 0
        self.failed = 0
        self.preferences_unread = 0

    async def publish(self, updates: Sequence[Published]) -> None:
        if not updates:
            return
        stated = await self._read_preferences([user_id for user_id, _, _ in updates])
        messages = []
        for user_id, version, model in updates:
            known = stated.get(user_id)
            messages.append(
                UserUpdate(
                    user_id,
                    version,
                    model=model_bytes(model),
                    preferences=encode_preferences(known[0]) if known is not None else None,
                    preferences_version=known[1] if known is not None else None,
                )
            )
        try:
            await self._publisher.publish(messages)
        except PublishFailed as exc:
            self.failed += len(messages)
            log.warning("%d user updates not published to the edges: %s", len(messages), exc)
            return
        self.published += len(messages)

    async def _read_preferences(
        self, user_ids: list[str]
    ) -> Mapping[str, tuple[Mapping[str, float], int]]:
        if self._preferences is None:
            return {}
        try:
            return await self._preferences(user_ids)
        except RedisError as exc:
            self.preferences_unread += len(user_ids)
            log.warning(
                "preferences of %d users not read, models sent without them: %s", len(user_ids), exc
            )
            return {}


def in_turn(
    *hooks: Callable[[list[Published]], Awaitable[None]],
) -> Callable[[list[Published]], Awaitable[None]]:
    """One ``on_batch`` hook that calls each of ``hooks`` in turn."""

    async def run(updates: list[Published]) -> None:
        for hook in hooks:
            await hook(updates)

    return run
