"""Layer 2 of layered invalidation: which event invalidates what, as data.

The origin turns what happened into sync messages (``sync.messages``) with these rules and
publishes them to every region; edges apply messages without knowing why they were sent.

    event                                   ->  messages
    ----------------------------------------------------------------------------------
    feedback: purchase                      ->  invalidate the user's entries
    feedback: other actions                 ->  nothing (TTL and the settle window do it)
    explicit preference change              ->  invalidate the user's entries
    item out of stock                       ->  hard purge of every entry tagged with it
    item deleted from the catalog           ->  an item update, removed (and out of stock)
    item price change                       ->  hard purge of every entry tagged with it
    item back in stock, other item changes  ->  nothing (the next fill picks it up)
    model deployed                          ->  new model epoch (a soft purge of everything)
    segment definition changed              ->  invalidate the segment's shared entries

Hard purges remove entries (an unavailable item or a wrong price must not be shown, not
even as a stale-if-error answer); a model epoch only makes older entries stale, so they
still serve while the origin cannot answer. The tables are pure and tested as tables.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from protocol.actions import INVALIDATING_ACTIONS
from protocol.segments import Segment
from sync.messages import (
    InvalidateSegment,
    InvalidateUser,
    ItemUpdate,
    Message,
    ModelEpoch,
    PurgeTag,
)

# --- what happened ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Feedback:
    user_id: str
    action: str  # protocol.api.Action


@dataclass(frozen=True, slots=True)
class PreferenceChange:
    user_id: str


@dataclass(frozen=True, slots=True)
class ItemChange:
    item_id: str
    was_in_stock: bool
    in_stock: bool
    old_price: float
    new_price: float


@dataclass(frozen=True, slots=True)
class ItemRemoved:
    item_id: str


@dataclass(frozen=True, slots=True)
class ModelDeployed:
    epoch: int
    model_version: str


@dataclass(frozen=True, slots=True)
class SegmentChanged:
    segment: Segment


Event = Feedback | PreferenceChange | ItemChange | ItemRemoved | ModelDeployed | SegmentChanged

# --- the rules --------------------------------------------------------------------------


def item_tag(item_id: str) -> str:
    """The surrogate tag an entry carries for each item it shows."""
    return item_id


def user_tag(user_id: str) -> str:
    """The surrogate tag of an entry filled for one user (power and active users)."""
    return f"user:{user_id}"


def segment_tag(segment: str) -> str:
    """The surrogate tag of every entry filled for a segment."""
    return f"segment:{segment}"


def _feedback(event: Feedback) -> list[Message]:
    if event.action in INVALIDATING_ACTIONS:
        return [InvalidateUser(event.user_id, reason=event.action)]
    return []


# The reason of an InvalidateUser for a preference change: an edge then asks for the user's
# state again before ranking for them itself.
PREFERENCE_REASON = "preference"


def _preference(event: PreferenceChange) -> list[Message]:
    return [InvalidateUser(event.user_id, reason=PREFERENCE_REASON)]


def _item(event: ItemChange) -> list[Message]:
    went_out = event.was_in_stock and not event.in_stock
    repriced = event.old_price != event.new_price
    if went_out or repriced:
        return [PurgeTag(item_tag(event.item_id), soft=False)]
    return []


def _removed(event: ItemRemoved) -> list[Message]:
    # ``in_stock=False``: an edge that does not know ``removed`` still hard-purges the item.
    return [ItemUpdate(event.item_id, in_stock=False, price=None, removed=True)]


def _model(event: ModelDeployed) -> list[Message]:
    return [ModelEpoch(event.epoch, event.model_version)]


def _segment(event: SegmentChanged) -> list[Message]:
    return [InvalidateSegment(event.segment.value)]


RULES: Mapping[type, Callable[..., list[Message]]] = {
    Feedback: _feedback,
    PreferenceChange: _preference,
    ItemChange: _item,
    ItemRemoved: _removed,
    ModelDeployed: _model,
    SegmentChanged: _segment,
}


def messages_for(event: Event) -> list[Message]:
    """The sync messages ``event`` calls for (none: the TTL is enough)."""
    return RULES[type(event)](event)
