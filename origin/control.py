"""The origins' control stream: what every origin process hears from the others.

Several origins run side by side (``perso up --origins N``); each holds in memory what it
ranks by (the live ranking policy, the catalog index), and a change made on one must reach
the others without a restart. They read ``keys.ORIGINS_SYNC_STREAM``, published by the
edges' publisher script (``sync.publisher``: one sequence, chained entries, the ``{sync}``
hash tag), with the edges' subscriber (``sync.subscriber``: order, gaps, reconnection):

- ``ModelEpoch`` (a model deployed or a policy promoted, on any origin): the origin ranks
  by its policy from then on, if its epoch is newer than the live one's. The deployment
  pointer is still read at start, and polled every ``PERSO_POLICY_POLL_S`` (30 s) as a
  safety net for an epoch written but not announced (its publish failed).
- ``CatalogChange`` (items ingested or deleted, a rebuild promoted, a catalog origin
  started): what to reload is ``origin.catalog.replication.reload_for``'s rule, and the
  reload runs beside the stream (``origin.catalog_follower``).

The cursor lives in memory: an origin that starts holds nothing older than what it is
about to load, so it starts at the stream's newest entry, taken *before* it reads the
deployment pointer and its catalog (``start_cursor``), so that nothing published while it
loads is missed. A gap (messages trimmed away or lost, an entry that could not be read or
applied) means something was missed: the origin reads the deployment pointer again and,
unless it owns the catalog's only store, reloads the whole catalog.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from origin.catalog.replication import EVERYTHING, mark_of, reload_for, reloads_on_gap
from origin.catalog_follower import CatalogFollower
from origin.runtime import Origin
from protocol import keys
from redis_client.client import RedisClient
from sync.cursor import Cursor, MemoryCursor
from sync.gaps import Gap
from sync.messages import CatalogChange, Envelope, ModelEpoch
from sync.subscriber import SyncSubscriber, newest_cursor

log = logging.getLogger(__name__)

# The subscriber's name in logs and gaps.
NAME = "origins"


async def start_cursor(redis: RedisClient) -> Cursor:
    """Where a starting origin reads the stream from: right after its newest entry."""
    return await newest_cursor(redis, keys.ORIGINS_SYNC_STREAM)


class OriginControl:
    """What the origin does with each message of the stream, and with a gap in it."""

    def __init__(self, origin: Origin, follower: CatalogFollower) -> None:
        self._origin = origin
        self.follower = follower
        self.epochs = 0  # model epochs applied (a newer one each)
        self.changes = 0  # catalog changes heard (its own included)

    async def apply(self, envelope: Envelope) -> None:
        origin = self._origin
        match envelope.message:
            case ModelEpoch(epoch=epoch, policy=policy, model_version=version):
                if origin.adopt_announced(epoch, policy, version):
                    self.epochs += 1
            case CatalogChange() as change:
                self.changes += 1
                reload = reload_for(origin.instance, origin.catalog_mark, change)
                self.follower.note(reload, mark_of(change))
            case other:  # nothing else is published to the origins
                log.warning("origins stream: %s ignored", type(other).__name__)

    async def on_gap(self, gap: Gap) -> None:
        origin = self._origin
        log.warning("origins stream: gap (%s), deployment pointer read again", gap.kind)
        await origin.read_policy()
        if reloads_on_gap(origin.role):
            self.follower.note(EVERYTHING)

    def subscriber(
        self, redis: RedisClient, cursor: Cursor, clock: Callable[[], float]
    ) -> SyncSubscriber:
        """The stream's reader from ``cursor``, on ``redis`` (a client of its own: it
        blocks in XREAD for up to a second at a time)."""
        return SyncSubscriber(
            redis,
            NAME,
            self.apply,
            MemoryCursor(cursor),
            clock,
            on_gap=self.on_gap,
            stream=keys.ORIGINS_SYNC_STREAM,
        )
