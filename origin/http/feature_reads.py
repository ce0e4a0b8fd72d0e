"""What a ranking request reads from Redis before it ranks, each within the failure
table's 100 ms: the user's model, history and explicit preferences in one round trip
(recording the request's context as their latest), or only that context for a shared
answer, and the candidates' posteriors in the decision's context cell. A failed or slow
read is reported, never raised: the request degrades (``origin.http.personalize``).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import RedisError

from origin.learned import stated_preferences
from origin.learned.posteriors import Stored
from origin.learned.user_models import decode_record
from origin.ranking import history
from origin.ranking.history import RankingHistory, RequestContext
from origin.runtime import Origin
from protocol import keys
from protocol.exceptions import MalformedMessage
from relevance.user_model import UserModel

log = logging.getLogger(__name__)

# The failure table: a feature/posterior store slower than 100 ms is treated as unavailable.
FEATURE_READ_TIMEOUT_S = 0.1


@dataclass(frozen=True)
class UserRead:
    state: RankingHistory
    model: UserModel | None
    failed: bool
    # Category name -> signed strength (``origin.ranking.preferences``).
    preferences: stated_preferences.Strengths = field(default_factory=dict)


async def read_user(origin: Origin, user_id: str, context: RequestContext | None) -> UserRead:
    """The user's model, history and preferences in one round trip, recording ``context``
    as their latest; a failed or slow read is reported, never raised (the answer degrades)."""

    async def run() -> list[Any]:
        async with origin.redis.pipeline(transaction=False) as pipe:
            pipe.get(keys.user_record(user_id))
            history.queue_read(pipe, user_id)
            stated_preferences.queue_read(pipe, user_id)
            if context is not None:
                history.queue_context_write(pipe, user_id, context)
            replies: list[Any] = await pipe.execute()
            return replies

    try:
        replies = await asyncio.wait_for(run(), FEATURE_READ_TIMEOUT_S)
    except (RedisError, TimeoutError) as exc:
        log.warning("user model and history read failed, serving popular items: %r", exc)
        return UserRead(RankingHistory(), None, failed=True)
    raw, fields, members, stated = replies[0], replies[1], replies[2], replies[3]
    return UserRead(
        history.decode_history(fields, members),
        model_of(origin, raw, user_id),
        False,
        stated_preferences.decode(stated),
    )


def model_of(origin: Origin, raw: bytes | None, user_id: str) -> UserModel | None:
    """The user's model from their stored record; None for a user without one (or with
    an unreadable one: served as a cold user until the worker writes it again)."""
    try:
        return decode_record(raw, origin.index.dim).model
    except MalformedMessage as exc:
        log.warning("record of %s unreadable, serving them as cold: %s", user_id, exc)
        return None


async def record_context(origin: Origin, user_id: str, context: RequestContext) -> None:
    """Record the user's latest request context; a failure costs only that record."""

    async def run() -> None:
        async with origin.redis.pipeline(transaction=False) as pipe:
            history.queue_context_write(pipe, user_id, context)
            await pipe.execute()

    try:
        await asyncio.wait_for(run(), FEATURE_READ_TIMEOUT_S)
    except (RedisError, TimeoutError) as exc:
        log.warning("could not record the context of %s: %r", user_id, exc)


async def read_posteriors(origin: Origin, cell: str, item_ids: Any) -> Stored | None:
    try:
        return await asyncio.wait_for(
            origin.posteriors.read(cell, item_ids), FEATURE_READ_TIMEOUT_S
        )
    except (RedisError, TimeoutError) as exc:
        log.warning("posterior read failed, ranking without exploration: %r", exc)
        return None
