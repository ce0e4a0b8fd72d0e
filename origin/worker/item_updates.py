"""The stream workers' other publish toward the edges: the items whose posteriors a batch
changed, as ``ItemPosteriors`` sync messages (``sync.messages``), one per context cell and
batch (split past ``MAX_ITEMS`` items), to every region.

An edge ranks a segment's users from a pool its origin filled up to a minute ago
(``edge.serve.pool_answer``); without these, every item in it would keep the posterior it had
then, and an item shown a thousand times since would still look unseen: every edge would
keep exploring it (measured in process on the click-only shop: pools a minute old cost
about 13 points of final regret against live posteriors, refreshed every second about
none). With them, an edge folds each change into the pools holding the item within a batch
of the worker (``edge.ranking.live_posteriors``).

Best effort, like the user updates: the posteriors are written already; a failed read or
publish is counted and logged, and the next pool fill brings what was missed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
from redis.exceptions import RedisError

from origin.learned.posteriors import PosteriorStore
from sync.exceptions import PublishFailed
from sync.messages import ItemPosteriors
from sync.publisher import SyncPublisher

log = logging.getLogger(__name__)

# Items per message at most: a busy batch's cell is split in messages of this many.
MAX_ITEMS = 1000


class ItemUpdates:
    def __init__(self, publisher: SyncPublisher, posteriors: PosteriorStore) -> None:
        self._publisher = publisher
        self._posteriors = posteriors
        self.published = 0  # items, summed over cells
        self.failed = 0

    async def publish(self, touched: Iterable[tuple[str, str]]) -> None:
        """The current rows of the ``touched`` (cell, item) pairs, to every region."""
        cells: dict[str, list[str]] = {}
        for cell, item in sorted(touched):
            cells.setdefault(cell, []).append(item)
        if not cells:
            return
        count = sum(len(items) for items in cells.values())
        try:
            rows = await self._posteriors.read_rows(cells)
        except RedisError as exc:
            self.failed += count
            log.warning("%d item posteriors not read for the edges: %s", count, exc)
            return
        messages = [
            ItemPosteriors(
                cell, tuple(items[start : start + MAX_ITEMS]), _packed(rows[cell], start)
            )
            for cell, items in cells.items()
            for start in range(0, len(items), MAX_ITEMS)
        ]
        try:
            await self._publisher.publish(messages)
        except PublishFailed as exc:
            self.failed += count
            log.warning("%d item posteriors not published to the edges: %s", count, exc)
            return
        self.published += count


def _packed(rows: npt.NDArray[np.float64], start: int) -> bytes:
    return np.asarray(rows[start : start + MAX_ITEMS], "<f8").tobytes()
