"""The region's popular list: what an edge serves when it has nothing better and the
origin cannot answer (stale-if-error's last resort), or a caller is over its rate limit.

It is the origin's answer for a new visitor on the home page of the edge's own region:
segment-scoped, so it holds nobody's data. Fetched at start-up and refreshed in the
background every ``REFRESH_S``; a failed refresh keeps the list it had. An item the
catalog deleted leaves the list at once (``drop``), and a refresh leaves out the items
deleted lately (``edge.cache.removed_items``), in case the origin ranked it before the delete.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable

from edge.cache.entry import CachedItem, Entry
from edge.cache.removed_items import RemovedItems
from edge.exceptions import EdgeError
from edge.origins.client import OriginClient
from protocol.api import PersonalizeRequest
from protocol.audience import Shared
from protocol.segments import Segment

log = logging.getLogger(__name__)

REFRESH_S = 60.0
SIZE = 100
# The request is segment-scoped: the origin ranks for the segment of a new visitor and
# does not use this user's data (it has none: edges never forward it as a caller).
POPULAR_USER = "edge-popular"
AUDIENCE = Shared(Segment.NEW.value)


def popular_request() -> PersonalizeRequest:
    return PersonalizeRequest.model_validate(
        {
            "user_id": POPULAR_USER,
            "context": {"page_type": "home", "device": "desktop"},
            "constraints": {"count": SIZE},
            "options": {"include_explanation": True},
        }
    )


class PopularList:
    def __init__(
        self,
        origin: OriginClient,
        *,
        clock: Callable[[], float],
        logged_by: str,
        removed: RemovedItems | None = None,
    ) -> None:
        self._origin = origin
        self._clock = clock
        self._removed = removed if removed is not None else RemovedItems(clock=clock)
        # The list is nobody's answer: the edge logs a decision when it serves from it, so
        # the origin must not log the refresh as one (``protocol.decisions``).
        self._logged_by = logged_by
        self.entry: Entry | None = None

    async def refresh(self) -> bool:
        try:
            filled = await self._origin.personalize(
                popular_request(), audience=AUDIENCE, logged_by=self._logged_by
            )
        except EdgeError as exc:
            log.info("popular list not refreshed: %s", exc)
            return False
        answer = filled.answer
        if filled.audience != AUDIENCE:
            # Served to every user of the region: only an answer built for no one in particular.
            log.error("popular list not refreshed: the origin answered for one user")
            return False
        kept = [answer.items[n] for n in self._removed.kept(i.item_id for i in answer.items)]
        if answer.metadata.degraded or not kept:
            return False
        now = self._clock()
        self.entry = Entry(
            items=tuple(CachedItem.of(item) for item in kept),
            complete=True,
            model_version=answer.metadata.model_version,
            exploration_applied=False,
            filled_at=now,
            expires_at=now,
            stale_until=now,
            degraded=True,
            audience=AUDIENCE,
        )
        return True

    def drop(self, item_id: str) -> None:
        """Leave ``item_id`` out of the list (the catalog deleted it)."""
        entry = self.entry
        if entry is None or all(item.item_id != item_id for item in entry.items):
            return
        items = tuple(item for item in entry.items if item.item_id != item_id)
        self.entry = dataclasses.replace(entry, items=items) if items else None

    async def run(self, stop: asyncio.Event) -> None:
        """Refresh every ``REFRESH_S`` until ``stop``; every few seconds while it has no list."""
        while not stop.is_set():
            delay = REFRESH_S if self.entry is not None else min(5.0, REFRESH_S)
            try:
                await asyncio.wait_for(stop.wait(), delay)
            except TimeoutError:
                await self.refresh()
