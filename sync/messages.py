"""Sync messages: what the origin tells every edge (and the origins one another). Their
msgpack wire format (bodies, envelopes, stream entries) is ``sync.codec``'s.

==================  ======================  ============================================
class               wire ``type`` / scope   meaning at the edge
==================  ======================  ============================================
UserUpdate          user_update             the user's model (version; its bytes) or segment moved
InvalidateUser      invalidate / user       drop the user's entries (purchase, preference)
InvalidateSegment   invalidate / segment    drop every entry of a segment
InvalidateKey       invalidate / key        drop one cache key
PurgeTag            purge_tag               drop (soft: mark stale) entries tagged ``tag``
ItemUpdate          item_update             an item's stock or price changed, or it was
                                            deleted from the catalog (``removed``)
ModelEpoch          model_epoch             a new model or ranking policy is live: older
                                            entries are stale; the edge ranks by the policy
ItemPosteriors      item_posteriors         the workers changed some items' posteriors in a
                                            context cell: the pools the edge ranks from
                                            take them (``edge.ranking.live_posteriors``)
ItemsChanged        items_changed           the catalog ingested, changed or deleted some
                                            items (or all of it): the edge's item vectors
                                            fetch them (``edge.ranking.item_vectors``)
CatalogChange       catalog_change          origins only: the catalog changed (some items,
                                            or all of it); reload them
==================  ======================  ============================================

``CatalogChange`` goes to the origins' stream only (``for_edges`` is False): an edge that
does not know a type refuses it as malformed, and a refused entry breaks its stream's
chain, which the edge must treat as a gap (everything stale). The publisher refuses to
send it to a region.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any

from sync.exceptions import MalformedMessage


@dataclass(frozen=True, slots=True)
class UserUpdate:
    """The origin wrote a new model for the user (``version``: the user's state version,
    which only grows; ``model``: the model as ``relevance.user_model.model_bytes`` encodes
    it, so an edge can rank for the user without asking) or moved them to another
    activity segment. With the model, the user's stated preferences as they were read
    then (``protocol.user_model_wire.encode_preferences``) and their version
    (``preferences_version``, which only grows): an edge that has both ranks the user
    without asking the origin anything."""

    user_id: str
    version: int
    segment: str | None = None
    model: bytes | None = None
    preferences: bytes | None = None
    preferences_version: int | None = None


@dataclass(frozen=True, slots=True)
class InvalidateUser:
    user_id: str
    reason: str  # what caused it (``purchase``, ``preference``...), for logs and metrics


@dataclass(frozen=True, slots=True)
class InvalidateSegment:
    segment: str


@dataclass(frozen=True, slots=True)
class InvalidateKey:
    key: str


@dataclass(frozen=True, slots=True)
class PurgeTag:
    """Every entry tagged ``tag`` at fill time; ``soft``: keep it for stale-if-error."""

    tag: str
    soft: bool


@dataclass(frozen=True, slots=True)
class ItemUpdate:
    """What changed about an item; None: unchanged. ``removed``: the item was deleted
    from the catalog; sent with ``in_stock=False`` so that an edge that predates the field
    still hard-purges the item's entries."""

    item_id: str
    in_stock: bool | None
    price: float | None
    removed: bool = False


@dataclass(frozen=True, slots=True)
class ModelEpoch:
    """A new deployment is live (``origin.catalog.deployment``): its epoch, model version
    and ranking policy (``protocol.policies.encode_policy``; None: the configured one).
    ``policy`` is optional on the wire, so an edge that predates it applies the epoch (its
    soft purge) and ignores the policy, and an origin that predates it sends none: a
    rolling deploy in either order stays safe."""

    epoch: int
    model_version: str
    policy: bytes | None = None


@dataclass(frozen=True, slots=True)
class ItemPosteriors:
    """The workers changed the posteriors of ``item_ids`` in context cell ``cell`` (``all``:
    over all contexts): ``rows`` holds each one's stored row as Redis holds it now, in
    ``item_ids``'s order, three little-endian float64 (alpha, beta, last change in ms;
    ``rows_of`` reads them). Sent after every worker batch that changed any, so that an
    edge ranks by what every impression and engagement taught within a moment, not by what
    its pool held when it was filled."""

    cell: str
    item_ids: tuple[str, ...]
    rows: bytes

    def rows_of(self) -> tuple[tuple[float, float, float], ...]:
        """The rows, checked: ``MalformedMessage`` for a size that does not match the ids,
        a non-finite or negative number."""
        width = 24
        if len(self.rows) != width * len(self.item_ids):
            raise MalformedMessage(
                f"item_posteriors: {len(self.rows)} bytes of rows for {len(self.item_ids)} items"
            )
        values = struct.unpack(f"<{3 * len(self.item_ids)}d", self.rows)
        if not all(math.isfinite(v) and v >= 0 for v in values):
            raise MalformedMessage("item_posteriors: a row holds a non-finite or negative number")
        return tuple(
            (values[3 * n], values[3 * n + 1], values[3 * n + 2]) for n in range(len(self.item_ids))
        )


@dataclass(frozen=True, slots=True)
class ItemsChanged:
    """The catalog ingested, updated or deleted ``item_ids`` (None: everything may have
    changed, a rebuild's promotion or a catalog origin that started), and is at catalog
    ``version`` after it: an edge holding item vectors fetches those items' vectors (all of
    them, for an ``everything``) from an origin whose catalog is at that version or later
    (``protocol.item_vectors``). The edges' counterpart of ``CatalogChange``."""

    version: int
    item_ids: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class CatalogChange:
    """The catalog changed on the origin ``origin`` (the process that wrote it, by its
    instance id: it skips its own): ``item_ids`` were ingested, updated or deleted, or,
    None, everything may have changed (a rebuild's promotion; a catalog origin that
    started). ``version`` and ``slot`` are the catalog's after the change
    (``catalog:version``, the live slot ``items`` names; None: no collection): an origin
    holding exactly these needs no reload for an ``everything``."""

    origin: str
    version: int
    slot: str | None = None
    item_ids: tuple[str, ...] | None = None


Message = (
    UserUpdate
    | InvalidateUser
    | InvalidateSegment
    | InvalidateKey
    | PurgeTag
    | ItemUpdate
    | ModelEpoch
    | ItemPosteriors
    | ItemsChanged
    | CatalogChange
)

# Messages for the origins' stream only (see the module's docstring).
ORIGINS_ONLY: tuple[type[Any], ...] = (CatalogChange,)


def for_edges(message: Message) -> bool:
    """Whether an edge may be sent ``message`` (every type it knows)."""
    return not isinstance(message, ORIGINS_ONLY)


@dataclass(frozen=True, slots=True)
class Envelope:
    seq: int  # origin sequence, >= 1, strictly increasing in every region stream
    published_at_ms: int  # the publisher's clock, milliseconds since the epoch
    message: Message
