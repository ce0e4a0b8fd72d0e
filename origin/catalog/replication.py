"""Several origins, one catalog: who holds the vector store, and what each origin reloads
when the origins' stream (``origin.control``) says the catalog changed. Pure rules, and
the one read of a catalog's mark (``read_mark``).

Three roles (``role_of``):

- **owner**: Qdrant local mode (the default), opened by this process. Local mode admits one
  process per path, so one origin owns it: the *catalog origin*, which takes every catalog
  write (ingest, delete, rebuild) and announces each (``CatalogChange``).
- **shared**: a Qdrant server (``QDRANT_URL``), which every origin opens: any of them may
  write, and the others reload what it announced from the server.
- **replica**: ``PERSO_CATALOG_ORIGIN_URL`` names the catalog origin; this origin holds no
  vector store, loads its in-memory index from the catalog origin
  (``origin.catalog.replica``) and refuses catalog writes with a 409 naming it.

A catalog's *mark* is its ``catalog:version`` (bumped by every ingest or delete that
changed something) and the slot ``items`` names (moved by a rebuild's promotion): two
origins holding the same mark hold the same catalog. An announcement of "everything"
(a rebuild, a catalog origin that started) is therefore reloaded only by an origin whose
mark differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from config.settings import Settings
from origin.catalog.vector_store import VectorStore
from protocol import keys
from redis_client.client import RedisClient
from sync.messages import CatalogChange


class CatalogRole(StrEnum):
    OWNER = "owner"  # opens Qdrant local mode: the catalog origin
    SHARED = "shared"  # opens the Qdrant server every origin opens
    REPLICA = "replica"  # loads from the catalog origin; no vector store


def role_of(settings: Settings) -> CatalogRole:
    if settings.catalog_origin_url:
        return CatalogRole.REPLICA
    if settings.qdrant_url:
        return CatalogRole.SHARED
    return CatalogRole.OWNER


@dataclass(frozen=True, slots=True)
class CatalogMark:
    """Which catalog an origin holds: ``catalog:version`` and the live slot (None: no
    collection yet)."""

    version: int
    slot: str | None


# The mark of a catalog never written: no version, no collection.
NO_CATALOG = CatalogMark(0, None)


async def read_mark(redis: RedisClient, store: VectorStore) -> CatalogMark:
    """The mark of the catalog ``store`` holds now. Read it before loading the catalog: a
    write in between leaves the mark behind the items, which costs at most one reload more."""
    version = await redis.get(keys.CATALOG_VERSION)
    return CatalogMark(int(version or 0), await store.items_slot())


@dataclass(frozen=True, slots=True)
class Reload:
    """What to reload: everything, or the items ``item_ids`` (those the source no longer
    holds leave the index); neither: nothing."""

    everything: bool = False
    item_ids: tuple[str, ...] = ()

    @property
    def nothing(self) -> bool:
        return not self.everything and not self.item_ids


NOTHING = Reload()
EVERYTHING = Reload(everything=True)


def mark_of(change: CatalogChange) -> CatalogMark:
    return CatalogMark(change.version, change.slot)


def reload_for(me: str, held: CatalogMark | None, change: CatalogChange) -> Reload:
    """What the origin whose instance id is ``me``, holding the catalog ``held``, reloads
    for ``change``: nothing of its own (it swapped its index when it wrote), the items
    named, or everything unless it already holds the catalog announced."""
    if change.origin == me:
        return NOTHING
    if change.item_ids is None:
        return NOTHING if held == mark_of(change) else EVERYTHING
    return Reload(item_ids=change.item_ids)


def merged(pending: Reload, more: Reload) -> Reload:
    """One reload doing the work of both: everything absorbs any items; items add up (each
    once, in the order first named)."""
    if pending.everything or more.everything:
        return EVERYTHING
    return Reload(item_ids=tuple(dict.fromkeys((*pending.item_ids, *more.item_ids))))


def reloads_on_gap(role: CatalogRole) -> bool:
    """Whether a gap in the origins' stream (messages missed) reloads the whole catalog:
    not for the owner, which is the only writer of its store and missed nothing of it."""
    return role is not CatalogRole.OWNER


def announces_at_start(role: CatalogRole) -> bool:
    """Whether a starting origin announces its catalog (an ``everything`` with its mark):
    the catalog origin does, so that a replica that missed a change it wrote just before
    it stopped (written, not yet announced) reloads, and one in step does nothing."""
    return role is CatalogRole.OWNER
