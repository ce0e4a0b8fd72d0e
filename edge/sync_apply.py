"""What an edge does with each sync message (layer 2 of layered invalidation).

Entries carry surrogate tags from their fill (``edge.serve.fill.fill``): every item they show,
``user:<id>`` when filled for one user (power and active users), ``segment:<name>``.

- ``InvalidateUser``, ``UserUpdate``: drop the user's own entries (their next request fills
  from the new state). Segment-wide entries hold nobody's data and stay. A ``UserUpdate``
  carrying the user's model (and their stated preferences) is also held
  (``edge.ranking.user_models``) when the edge serves the user (it has seen their feedback, or
  holds their model already): every edge of a region reads every update, and keeps only
  those of its own users. A preference change drops the preferences held: the next
  update, or the origin asked once, brings the new ones before the edge ranks for them.
- ``InvalidateSegment``: drop the segment's entries. ``InvalidateKey``: drop one key.
- ``PurgeTag``: hard, drop every entry tagged; soft, mark them stale (served only when the
  origin cannot answer). ``ItemUpdate`` out of stock or with a price: a hard purge of the
  item's tag; ``removed`` (the catalog deleted the item): the same purge, and the item is
  forgotten elsewhere too (``forget_item``: the popular list, cached explanations, fills in
  flight).
- ``ModelEpoch``: every entry filled before it is stale from now on (a soft purge of all).
  With a ranking policy (``protocol.policies``), the edge ranks by it from now on
  (``adopt_policy``); an epoch without one (nothing promoted yet, or an origin that
  predates policies) keeps the policy held. A policy that cannot be decoded is logged and
  the one held kept; the epoch is applied all the same. Only a newer epoch counts.
- ``ItemPosteriors``: the workers changed some items' posteriors; the edge's table of them
  takes the rows (``edge.ranking.live_posteriors``), and the pools holding the items are ranked by
  them from then on. Rows that cannot be read are refused and logged, nothing else
  changes.
- ``ItemsChanged``: the catalog ingested, changed or deleted items; the edge's item vectors
  fetch them (``edge.ranking.item_vectors``), and the rows held of them as users' own
  candidates are not ranked until sent again (``edge.ranking.own_candidates``; all of them
  dropped when the message names no items: the whole catalog changed). An ``ItemUpdate``
  also keeps the rows held of the item out of rankings until sent again, as does a
  ``PurgeTag`` of an item's tag (its stock or price changed: the tag is the item's id).
- A gap in the stream (the edge missed messages): the same soft purge of everything, since
  no entry can be proven fresh any more; the item vectors are read again and the own
  candidates' rows dropped (``catalog_lost``).

Soft purges are moments, not writes: an entry is stale when it was filled before a soft
purge that concerns it (``Staleness.is_stale``). The hit path checks one float while no
tag-level soft purge is pending.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from edge.cache.freshness import Staleness
from edge.cache.store import EntryStore
from edge.ranking.live_posteriors import LivePosteriors
from edge.ranking.user_models import UserModels
from invalidation.rules import PREFERENCE_REASON, item_tag, segment_tag, user_tag
from protocol.exceptions import MalformedMessage
from protocol.histogram import LatencyHistogram
from protocol.policies import Policy, decode_policy
from protocol.user_model_wire import decode_preferences
from relevance.user_model import model_from_bytes
from sync.messages import (
    Envelope,
    InvalidateKey,
    InvalidateSegment,
    InvalidateUser,
    ItemPosteriors,
    ItemsChanged,
    ItemUpdate,
    ModelEpoch,
    PurgeTag,
    UserUpdate,
)

log = logging.getLogger(__name__)


@dataclass
class SyncCounters:
    applied: int = 0
    by_type: dict[str, int] = field(default_factory=dict)
    gaps: int = 0
    # users' models held, and those refused (damaged, or of another dimension)
    models_held: int = 0
    models_refused: int = 0
    # items' posterior rows taken, and messages of them refused (damaged)
    item_rows: int = 0
    item_messages_refused: int = 0
    # publish (origin clock) to applied (edge clock); the clocks must agree, as NTP keeps them
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)


class SyncApplier:
    def __init__(
        self,
        store: EntryStore,
        staleness: Staleness,
        *,
        clock: Callable[[], float],
        forget_item: Callable[[str], None] | None = None,
        item_changed: Callable[[str], None] | None = None,
        catalog_changed: Callable[[int, tuple[str, ...] | None], None] | None = None,
        catalog_lost: Callable[[], None] | None = None,
        users: UserModels | None = None,
        items: LivePosteriors | None = None,
        serves: Callable[[str], bool] | None = None,
        adopt_policy: Callable[[Policy], None] | None = None,
    ) -> None:
        self._store = store
        self._staleness = staleness
        self._clock = clock
        self._forget_item = forget_item
        self._item_changed = item_changed
        self._catalog_changed = catalog_changed
        self._catalog_lost = catalog_lost
        self._users = users
        self._items = items
        self._serves = serves
        self._adopt_policy = adopt_policy
        self.counters = SyncCounters()
        self.model_epoch = 0
        self.model_version: str | None = None
        self.policy: Policy | None = None  # the last epoch's policy, once one was announced

    async def apply(self, envelope: Envelope) -> None:
        message = envelope.message
        now = self._clock()
        match message:
            case UserUpdate() | InvalidateUser():
                await self._user_changed(message)
            case InvalidateSegment(segment=segment):
                await self._store.delete_tag(segment_tag(segment))
            case InvalidateKey(key=key):
                await self._store.delete(key)
            case PurgeTag():
                await self._purge(message, now)
            case ItemUpdate():
                await self._item_updated(message)
            case ItemsChanged(version=version, item_ids=item_ids):
                if self._catalog_changed is not None:
                    self._catalog_changed(version, item_ids)
            case ItemPosteriors():
                self._hold_items(message)
            case ModelEpoch(epoch=epoch, model_version=version, policy=policy):
                if epoch > self.model_epoch:
                    self.model_epoch, self.model_version = epoch, version
                    self._staleness.purge_all(now)
                    if policy is not None:
                        self._hold_policy(epoch, policy)
        counters = self.counters
        counters.applied += 1
        kind = type(message).__name__
        counters.by_type[kind] = counters.by_type.get(kind, 0) + 1
        counters.latency.observe(max(0.0, now * 1000 - envelope.published_at_ms))

    async def _purge(self, message: PurgeTag, now: float) -> None:
        if self._item_changed is not None:
            self._item_changed(message.tag)  # an item's tag: its stock or price changed
        if message.soft:
            self._staleness.purge_tag(message.tag, now)
        else:
            await self._store.delete_tag(message.tag)

    async def _item_updated(self, message: ItemUpdate) -> None:
        item = message.item_id
        if message.removed and self._forget_item is not None:
            # First: a fill landing during the purge below is stored without it.
            self._forget_item(item)
        if message.removed or message.in_stock is False or message.price is not None:
            if self._item_changed is not None:
                self._item_changed(item)
            await self._store.delete_tag(item_tag(item))

    async def _user_changed(self, message: UserUpdate | InvalidateUser) -> None:
        """The user's own entries go; their pushed model is held, or their state dropped
        when their preferences changed (asked again before they are ranked here)."""
        user = message.user_id
        await self._store.delete_tag(user_tag(user))
        if isinstance(message, UserUpdate):
            if message.model is not None:
                self._hold_model(user, message)
        elif message.reason == PREFERENCE_REASON and self._users is not None:
            self._users.forget_preferences(user)

    def _hold_items(self, message: ItemPosteriors) -> None:
        if self._items is None:
            return
        try:
            rows = message.rows_of()
        except MalformedMessage as exc:
            self.counters.item_messages_refused += 1
            log.warning("item posteriors of cell %s not taken: %s", message.cell, exc)
            return
        self._items.apply(message.cell, message.item_ids, rows)
        self.counters.item_rows += len(rows)

    def _hold_policy(self, epoch: int, raw: bytes) -> None:
        try:
            policy = decode_policy(raw)
        except MalformedMessage as exc:
            log.warning("ranking policy of epoch %d not held: %s", epoch, exc)
            return
        self._take_policy(policy, epoch)

    def _take_policy(self, policy: Policy, epoch: int, source: str = "announced") -> None:
        self.policy = policy
        if self._adopt_policy is not None:
            self._adopt_policy(policy)
        log.info("ranking policy %s, epoch %d (%s)", policy.label, epoch, source)

    def _hold_model(self, user: str, message: UserUpdate) -> None:
        users = self._users
        if users is None:
            return
        if user not in users and (self._serves is None or not self._serves(user)):
            return  # another edge's user
        assert message.model is not None
        try:
            model = model_from_bytes(message.model, users.dim)
        except MalformedMessage as exc:
            self.counters.models_refused += 1
            log.warning("user model of %s not held: %s", user, exc)
            return
        preferences, preferences_version = None, -1
        if message.preferences is not None and message.preferences_version is not None:
            try:
                preferences = decode_preferences(message.preferences)
                preferences_version = message.preferences_version
            except MalformedMessage as exc:
                log.warning("preferences of %s not held: %s", user, exc)
        if users.apply(user, message.version, model, preferences, preferences_version):
            self.counters.models_held += 1

    def adopt_live(self, epoch: int, policy: Policy) -> bool:
        """The origin's live policy, read rather than heard (``Edge.read_live_policy``: an
        edge that started after a promotion, or missed its ``ModelEpoch``): taken, as the
        epoch's message would have been, when ``epoch`` is newer than the last one heard;
        whether it was."""
        if epoch <= self.model_epoch:
            return False
        self.model_epoch = epoch
        self._staleness.purge_all(self._clock())
        self._take_policy(policy, epoch, "read from the origin")
        return True

    async def on_gap(self, detail: object) -> None:
        """Messages were lost: nothing cached can be proven fresh any more."""
        log.warning("sync gap (%s): every entry is stale until refilled", detail)
        self.counters.gaps += 1
        self._staleness.purge_all(self._clock())
        if self._catalog_lost is not None:
            self._catalog_lost()  # catalog changes may be among those lost
