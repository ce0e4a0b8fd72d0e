"""The key names inside one PoP's entry store (``edge.cache.redis_store``), all under the
store's prefix (``protocol.keys.edge_entry_prefix``, which carries the region's hash tag):
its epoch pointer and counter, each epoch's entry buffers, active pointers and tag sets,
and the fill leases of its edge processes. ``protocol.keys`` holds every other key.
"""

from __future__ import annotations

ENTRY_SUFFIXES = ("}:A", "}:B", "}:active", "}:tags")


class EdgeEntryKeys:
    """Every key name of one store's prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.epoch = f"{prefix}epoch"
        self.epochs = f"{prefix}epochs"

    def namespace(self, epoch: str) -> str:
        """What every key of ``epoch`` starts with."""
        return f"{self.prefix}e{epoch}:"

    def slot_head(self, epoch: str) -> str:
        return f"{self.namespace(epoch)}{{"

    def slot(self, epoch: str, key: str) -> tuple[str, str, str, str]:
        """Buffer A, buffer B, active pointer and tag set of ``key``."""
        head = self.slot_head(epoch) + key
        a, b, active, tags = (head + suffix for suffix in ENTRY_SUFFIXES)
        return a, b, active, tags

    def tag_head(self, epoch: str) -> str:
        return f"{self.namespace(epoch)}tag:{{"

    TAG_TAIL = "}"

    def tag(self, epoch: str, tag: str) -> str:
        return self.tag_head(epoch) + tag + self.TAG_TAIL

    def fill_lease(self, key: str) -> str:
        """The lease of one origin fill of the cache key ``key`` (its digest) among the
        PoP's edge processes (``edge.cache.fill_lease``): the leader's random token; TTL the
        lease (PX, ``PERSO_EDGE_COALESCE_WAIT_MS``), deleted by the leader once its entry is
        stored. Not in an epoch: a fill is for a key, whatever table it lands in."""
        return f"{self.prefix}fill:{key}"
